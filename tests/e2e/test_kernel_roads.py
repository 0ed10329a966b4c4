"""The CustomOp road (after vLLM drops IR) gives the IR road's tokens on vLLM 0.32.

``kernel_road="custom_op"``: RMSNorm and the fused add-norm reach the device
kernels through ``TemplateRMSNorm.forward_oot`` (custom_ops/layernorm.py), and
vLLM IR keeps only ``native`` for them; the IR road (default) dispatches the
same kernels through the ``template_cpu`` provider. Greedy fp32 tokens must be
identical to each other and to stock vLLM, in eager mode and compiled.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

CUSTOM_OP = ("--kernel-road", "custom_op")


@pytest.mark.parametrize("extra", [("--enforce-eager",), ()], ids=["eager", "compiled"])
def test_custom_op_road_matches_ir_road_and_stock(engine_runs, extra: tuple[str, ...]) -> None:
    stock = engine_runs.run("--stock", "--enforce-eager")
    ir_road = engine_runs.run(*extra)
    road = engine_runs.run(*extra, *CUSTOM_OP)
    # The IR road dispatches RMSNorm through the template provider ...
    assert ir_road["ir_ops"]["rms_norm"]["priority"][0] == "template_cpu"
    # ... the CustomOp road calls the kernels from the layer, IR keeps native.
    assert road["ir_ops"]["rms_norm"]["priority"] == ["native"]
    assert road["ir_ops"]["fused_add_rms_norm"]["priority"] == ["native"]
    assert "+RMSNorm" in road["custom_ops"]
    assert road["custom_op_layers"]["TemplateRMSNorm"] == ["forward_oot"]
    assert road["tokens"] == ir_road["tokens"] == stock["tokens"]

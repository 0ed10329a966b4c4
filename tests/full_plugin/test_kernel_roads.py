"""The kernel roads besides vLLM IR give the IR road's tokens on vLLM 0.32.

``kernel_road="custom_op"``: RMSNorm and the fused add-norm reach the device
kernels through ``TemplateRMSNorm.forward_oot`` (custom_ops/layernorm.py), and
vLLM IR keeps only ``native`` for them; the IR road (default) dispatches the
same kernels through the ``template_cpu`` provider. Greedy fp32 tokens must be
identical to each other and to stock vLLM, in eager mode and compiled.

The hardware-agnostic road: vLLM's Transformers modeling backend
(``model_impl="transformers"``) with ``VLLM_USE_HW_AGNOSTIC=1`` builds its norms and
gated activation from vLLM's hardware-agnostic layers, which the template replaces
(``custom_ops/hw_agnostic.py``); the report names the replacement classes and the
forward each ran, and the tokens equal stock vLLM's on the same road and
transformers'.
"""

from __future__ import annotations

import json

import pytest
from hf_reference import decoding_of

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


HW_AGNOSTIC = {"VLLM_USE_HW_AGNOSTIC": "1"}
TRANSFORMERS_BACKEND = ("--engine-args", json.dumps({"model_impl": "transformers"}))


def test_hw_agnostic_road_matches_stock_and_transformers(engine_runs, hf_greedy) -> None:
    ours = engine_runs.run("--enforce-eager", *TRANSFORMERS_BACKEND, env=HW_AGNOSTIC)
    stock = engine_runs.run("--stock", "--enforce-eager", *TRANSFORMERS_BACKEND, env=HW_AGNOSTIC)
    assert ours["model_class"].endswith("TransformersForCausalLM")
    # The Transformers backend's norms and SwiGLU are the template's replacements, on the
    # device kernels (forward_oot), not vLLM's hardware-agnostic forward_native.
    assert ours["custom_op_layers"]["TemplateTPAwareRMSNorm"] == ["forward_oot"]
    assert ours["custom_op_layers"]["TemplateHwAgnosticSiluAndMul"] == ["forward_oot"]
    assert ours["tokens"] == stock["tokens"]
    assert ours["tokens"] == hf_greedy(ours["prompt_token_ids"], **decoding_of(ours))

"""The reserved XPU folder (``devices/xpu``), checked on any machine: no XPU was available.

Its the entry point refuses a machine without an XPU with what to do, its config
policy puts IPEX first where IPEX has the op and leaves every op native under
Inductor, and it has no attention kernels of its own. (``devices/xpu/platform.py``
names this file; the IPEX kernels themselves run in ``tox -e ipex``.)
"""

from __future__ import annotations

import torch

from vllm_platform_template.attention.kernel_choice import resolve_attention_kernels
from vllm_platform_template.device import device_for
from vllm_platform_template.platform_hooks import policy
from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
    ERROR_QUALNAME,
    select_platform,
)
from vllm_platform_template.platform_hooks.policy import MODE_NONE, MODE_VLLM_COMPILE

IR_OPS = ("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse")


def test_xpu_is_reserved_and_reports_missing_device() -> None:
    selection = select_platform({DEVICE_ENV: "xpu"})
    assert selection.qualname == ERROR_QUALNAME
    assert "XPU" in selection.problem


def _priorities(mode: int, stage: str) -> dict[str, list[str]]:
    xpu = device_for("xpu")
    assert xpu is not None
    return policy.default_ir_op_priority(
        xpu.ir_provider, xpu.ir_ops, xpu.native_under_inductor, mode, stage, IR_OPS, "ir"
    )


def test_xpu_policy() -> None:
    """IPEX first in eager and fusion-only for the ops IPEX has, every op native under
    Inductor, vLLM's graph defaults."""
    for mode, stage in ((MODE_NONE, "graph"), (MODE_VLLM_COMPILE, "fusion_only")):
        result = _priorities(mode, stage)
        assert result["rms_norm"] == result["fused_add_rms_norm"] == ["template_ipex", "native"]
        assert result["gelu_and_mul_sparse"] == ["native"]  # IPEX has no such kernel
    graph = _priorities(MODE_VLLM_COMPILE, "graph")
    assert all(p == ["native"] for p in graph.values()), graph
    xpu = device_for("xpu")
    assert xpu is not None
    assert xpu.default_graph_mode is None
    assert xpu.max_capture_size(256, 1) is None


def test_xpu_attention_runs_the_reference() -> None:
    assert resolve_attention_kernels("xpu", "auto", torch.float32, 16, 64).name == "reference"

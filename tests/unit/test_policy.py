"""Config policy of the template platforms as pure functions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vllm_platform_template.platform_plugin import policy
from vllm_platform_template.platform_plugin.policy import (
    MODE_DYNAMO_TRACE_ONCE,
    MODE_NONE,
    MODE_STOCK_TORCH_COMPILE,
    MODE_VLLM_COMPILE,
)

OURS = "vllm_platform_template.compiler.TemplateCompiler"


def test_effective_mode() -> None:
    assert policy.effective_mode(None, 2) == MODE_VLLM_COMPILE
    assert policy.effective_mode(None, 0) == MODE_NONE
    assert policy.effective_mode(MODE_NONE, 3) == MODE_NONE


@pytest.mark.parametrize(
    ("mode", "base"),
    [(MODE_VLLM_COMPILE, "none"), (MODE_NONE, "all"), (MODE_DYNAMO_TRACE_ONCE, "all")],
)
def test_custom_ops_base(mode: int, base: str) -> None:
    assert policy.default_custom_ops_base(mode) == base


def test_ir_torch_wrap_only_under_vllm_compile() -> None:
    assert policy.ir_torch_wrap(MODE_VLLM_COMPILE)
    assert not policy.ir_torch_wrap(MODE_NONE)
    assert not policy.ir_torch_wrap(MODE_DYNAMO_TRACE_ONCE)


def test_vllm_compile_uses_template_compiler() -> None:
    decision = policy.resolve_compilation(MODE_VLLM_COMPILE, OURS, OURS, lora_enabled=False)
    assert (decision.mode, decision.backend, decision.note) == (MODE_VLLM_COMPILE, OURS, None)


def test_cpu_downgrade_is_undone() -> None:
    """CpuPlatform.check_and_update_config rewrites VLLM_COMPILE to DYNAMO_TRACE_ONCE with
    plain Inductor; the mixin resolves from the values it saved before that rewrite."""
    cc = SimpleNamespace(mode=MODE_VLLM_COMPILE, backend=OURS)
    requested = (cc.mode, cc.backend)  # what mixin.check_and_update_config saves
    # vllm/platforms/cpu.py::check_and_update_config (0.32), VLLM_CPU_CI_ENV unset:
    cc.mode, cc.backend = MODE_DYNAMO_TRACE_ONCE, "inductor"
    from_rewritten = policy.resolve_compilation(cc.mode, cc.backend, OURS, lora_enabled=False)
    assert (from_rewritten.mode, from_rewritten.backend) == (MODE_DYNAMO_TRACE_ONCE, "inductor")
    decision = policy.resolve_compilation(*requested, OURS, lora_enabled=False)
    assert (decision.mode, decision.backend, decision.note) == (MODE_VLLM_COMPILE, OURS, None)


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_explicit_stock_backend_is_honoured_and_logged(backend: str) -> None:
    decision = policy.resolve_compilation(MODE_VLLM_COMPILE, backend, OURS, lora_enabled=False)
    assert decision.backend == backend
    assert decision.note and "bypassed" in decision.note


@pytest.mark.parametrize("mode", [MODE_STOCK_TORCH_COMPILE, MODE_DYNAMO_TRACE_ONCE])
def test_dynamo_modes_get_a_dynamo_backend(mode: int) -> None:
    decision = policy.resolve_compilation(mode, OURS, OURS, lora_enabled=False)
    assert (decision.mode, decision.backend) == (mode, "inductor")


def test_lora_turns_compilation_off() -> None:
    decision = policy.resolve_compilation(MODE_VLLM_COMPILE, OURS, OURS, lora_enabled=True)
    assert decision.mode == MODE_NONE and "LoRA" in decision.note


def test_unsupported_fusions_are_listed() -> None:
    flags = {"fuse_norm_quant": True, "fuse_act_quant": False, "eliminate_noops": True}
    assert policy.enabled_unsupported_fusions(flags) == ["fuse_norm_quant"]


def test_compile_sizes_filled_only_when_missing_under_vllm_compile() -> None:
    assert policy.needs_compile_sizes(MODE_VLLM_COMPILE, None)
    assert not policy.needs_compile_sizes(MODE_VLLM_COMPILE, [])
    assert not policy.needs_compile_sizes(MODE_NONE, None)


def test_graph_defaults() -> None:
    assert policy.default_graph_mode("cpu") == "NONE"
    assert policy.default_graph_mode("cuda") is None
    assert policy.default_max_capture_size("cpu", 256, 1) == 16
    assert policy.default_max_capture_size("cpu", 4, 1) == 8
    assert policy.default_max_capture_size("cuda", 256, 1) is None


def test_graphs_need_vllm_compile_and_no_eager() -> None:
    assert policy.graphs_enabled(MODE_VLLM_COMPILE, False, True)
    assert not policy.graphs_enabled(MODE_VLLM_COMPILE, True, True)
    assert not policy.graphs_enabled(MODE_NONE, False, True)
    assert not policy.graphs_enabled(MODE_VLLM_COMPILE, False, False)


def test_compile_sizes_must_be_capture_sizes() -> None:
    assert policy.capture_size_problems([1, 2, 4, 8], [4, 8, 32]) == []
    problems = policy.capture_size_problems([1, 2, 4, 8], [3])
    assert len(problems) == 1 and "padded to 4" in problems[0]


def test_default_ir_priorities_are_compile_aware() -> None:
    eager = policy.default_ir_op_priority("cpu", MODE_NONE, "graph")
    graph = policy.default_ir_op_priority("cpu", MODE_VLLM_COMPILE, "graph")
    fusion = policy.default_ir_op_priority("cpu", MODE_VLLM_COMPILE, "fusion_only")
    assert eager["rms_norm"] == ["template_cpu", "native"]
    assert graph["gelu_and_mul_sparse"] == ["native"]
    assert fusion == eager
    cuda_graph = policy.default_ir_op_priority("cuda", MODE_VLLM_COMPILE, "graph")
    assert all(p == ["native"] for p in cuda_graph.values())
    cuda_eager = policy.default_ir_op_priority("cuda", MODE_NONE, "graph")
    assert all(p == ["template_triton", "native"] for p in cuda_eager.values())


def test_unknown_providers_list_the_registered_ones() -> None:
    problems = policy.unknown_providers(
        {"rms_norm": ["my_kernl", "native"], "fused_add_rms_norm": None},
        {"rms_norm": ["native", "my_kernel"]},
    )
    assert problems == [
        "unknown provider 'my_kernl' for vLLM IR op 'rms_norm'; registered providers: "
        "my_kernel, native"
    ]


def test_cpu_scheduler_defaults_replace_only_generic_defaults() -> None:
    assert policy.cpu_scheduler_defaults(8192, 256, 1) == (4096, 256)
    assert policy.cpu_scheduler_defaults(2048, 256, 2) == (4096, 256)
    assert policy.cpu_scheduler_defaults(1000, 256, 1) is None


def test_fusion_passes_per_stage() -> None:
    assert "silu_and_mul" in policy.fusion_passes("fusion_only")
    assert "silu_and_mul" not in policy.fusion_passes("graph")


def test_xpu_policy() -> None:
    """The XPU platform's policy (xpu.py names this test): IPEX first in eager and
    fusion-only, every op native under Inductor, vLLM's graph defaults."""
    for mode, stage in ((MODE_NONE, "graph"), (MODE_VLLM_COMPILE, "fusion_only")):
        priorities = policy.default_ir_op_priority("xpu", mode, stage)
        assert all(p == ["template_ipex", "native"] for p in priorities.values()), priorities
    graph = policy.default_ir_op_priority("xpu", MODE_VLLM_COMPILE, "graph")
    assert all(p == ["native"] for p in graph.values()), graph
    assert policy.default_graph_mode("xpu") is None
    assert policy.default_max_capture_size("xpu", 256, 1) is None

"""Config policy of the template platforms as pure functions."""

from __future__ import annotations

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
    # CpuPlatform rewrote the backend to "inductor"; the requested one was ours.
    decision = policy.resolve_compilation(MODE_VLLM_COMPILE, OURS, OURS, lora_enabled=False)
    assert decision.backend == OURS


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

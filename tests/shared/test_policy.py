"""Config policy of the template platforms as pure functions."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch

from vllm_platform_template.device import device_for
from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.platform_hooks import policy
from vllm_platform_template.platform_hooks.policy import (
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


# (device, runner, compiled, requested) -> (mode, words of the reason). Devices: "graphs" has
# whole-step graphs and attention kernels a graph may hold, "cpu" piecewise graphs only (its
# emulation), "graphs-reference" that device with the plain-torch attention (host-side lengths).
# Runners: "v2" Model Runner V2, "v1" the V1 runner. compiled: VLLM_COMPILE (the pieces exist;
# False is the hand-written model or -O0).
GRAPH_TABLE = [
    ("graphs", "v2", True, "FULL_AND_PIECEWISE", "FULL_AND_PIECEWISE", ()),
    ("graphs", "v2", True, "FULL_DECODE_ONLY", "FULL_DECODE_ONLY", ()),
    ("graphs", "v2", True, "FULL", "FULL_AND_PIECEWISE", ("mixed batches run piecewise",)),
    ("graphs", "v2", True, "PIECEWISE", "PIECEWISE", ()),
    ("graphs", "v2", True, "NONE", "NONE", ()),
    ("graphs", "v2", False, "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", ("nothing compiled",)),
    ("graphs", "v2", False, "FULL_DECODE_ONLY", "FULL_DECODE_ONLY", ()),
    ("graphs", "v2", False, "FULL", "FULL_DECODE_ONLY", ("mixed batches run eagerly",)),
    ("graphs", "v2", False, "PIECEWISE", "NONE", ("nothing compiled",)),
    ("graphs", "v1", True, "FULL_AND_PIECEWISE", "PIECEWISE", ("weak_ref_tensor",)),
    ("graphs", "v1", True, "FULL_DECODE_ONLY", "PIECEWISE", ("does not record whole steps",)),
    ("graphs", "v1", False, "FULL_DECODE_ONLY", "NONE", ("does not record whole steps",)),
    # torch.accelerator.Graph: V1 records whole steps through the platform's FULL wrapper
    ("accelerator", "v1", False, "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", ("nothing compiled",)),
    ("accelerator", "v1", False, "FULL_DECODE_ONLY", "FULL_DECODE_ONLY", ()),
    ("accelerator", "v2", False, "FULL_DECODE_ONLY", "NONE", ("does not record whole steps",)),
    ("graphs-reference", "v2", True, "FULL_AND_PIECEWISE", "PIECEWISE", ("on the host",)),
    ("graphs-reference", "v2", False, "FULL_DECODE_ONLY", "NONE", ("on the host",)),
    ("cpu", "v1", True, "FULL_AND_PIECEWISE", "PIECEWISE", ("piecewise graphs only",)),
    ("cpu", "v1", True, "PIECEWISE", "PIECEWISE", ()),
    ("cpu", "v1", False, "FULL", "NONE", ("piecewise graphs only", "nothing compiled")),
    ("cpu", "v1", False, "NONE", "NONE", ()),
]


@pytest.mark.parametrize(
    ("device", "runner", "compiled", "requested", "mode", "why"),
    GRAPH_TABLE,
    ids=[f"{d}-{r}-{'compiled' if c else 'eager'}-{q}" for d, r, c, q, _, _ in GRAPH_TABLE],
)
def test_graph_mode_policy_table(
    device: str, runner: str, compiled: bool, requested: str, mode: str, why: tuple[str, ...]
) -> None:
    decision = policy.resolve_graph_mode(
        requested,
        enforce_eager=False,
        pieces=compiled,
        device_full_graphs=device != "cpu",
        attention_full_graphs=device != "graphs-reference",
        runner_records_steps=(runner == "v2") != (device == "accelerator"),
    )
    assert decision.mode == mode
    said = "; ".join(decision.why)
    assert all(words in said for words in why), said
    assert bool(decision.why) == bool(why), said  # a changed mode always says why, else silent


def test_graph_mode_policy_every_request_and_eager() -> None:
    for requested in policy.GRAPH_MODES:
        for flags in range(16):
            pieces, full, attention, v2 = (bool(flags >> i & 1) for i in range(4))
            decision = policy.resolve_graph_mode(
                requested,
                enforce_eager=False,
                pieces=pieces,
                device_full_graphs=full,
                attention_full_graphs=attention,
                runner_records_steps=v2,
            )
            assert decision.mode in policy.GRAPH_MODES
            if "FULL" in decision.mode:
                assert full and attention and v2
                assert decision.mode != "FULL"  # mixed batches never FULL
            if "PIECEWISE" in decision.mode:
                assert pieces
        eager = policy.resolve_graph_mode(
            requested,
            enforce_eager=True,
            pieces=True,
            device_full_graphs=True,
            attention_full_graphs=True,
            runner_records_steps=True,
        )
        assert eager.mode == "NONE"
    with pytest.raises(ValueError, match="unknown cudagraph_mode"):
        policy.resolve_graph_mode(
            "SOMETIMES",
            enforce_eager=False,
            pieces=True,
            device_full_graphs=True,
            attention_full_graphs=True,
            runner_records_steps=True,
        )


def test_whole_step_devices_name_a_graph_api_and_have_kernels_graphs_may_hold() -> None:
    """A device that records whole steps names its graph API in its identity, and its
    own attention kernels allow FULL graphs (else FULL graphs would never run there)."""
    for device_type in DEVICE_PACKAGES:
        device = device_for(device_type)
        assert device is not None
        if device.records_whole_steps:
            identity = importlib.import_module(f"{DEVICE_PACKAGES[device_type]}.identity").IDENTITY
            assert identity.graph_api is not None, device.name
            kernels = device.attention()
            assert kernels is not None and kernels.full_graphs, device.name


def test_full_graphs_follow_the_kernels_the_engine_resolves() -> None:
    """The FULL-graph decision reads the attention kernels resolved from the config, not
    the option's text: ``auto`` falling back to the reference (no FULL graphs) is seen."""
    from vllm_platform_template.attention.kernel_choice import REFERENCE, engine_attention_kernels

    def config(attention: str, block_size: int | None = 16) -> SimpleNamespace:
        model = SimpleNamespace(dtype=torch.float32, get_head_size=lambda: 64)
        return SimpleNamespace(
            model_config=model,
            cache_config=SimpleNamespace(block_size=block_size),
            additional_config={"template": {"attention": attention}},
        )

    assert engine_attention_kernels(config("reference"), "cpu") is REFERENCE
    assert engine_attention_kernels(config("auto", block_size=None), "cpu") is None
    # no device folder for this type: auto falls back to the reference, which no graph holds
    fallback = engine_attention_kernels(config("auto"), "no_such_device")
    assert fallback is REFERENCE and not fallback.full_graphs


def test_compile_sizes_must_be_capture_sizes() -> None:
    assert policy.capture_size_problems([1, 2, 4, 8], [4, 8, 32]) == []
    problems = policy.capture_size_problems([1, 2, 4, 8], [3])
    assert len(problems) == 1 and "padded to 4" in problems[0]


def test_custom_op_road_enables_the_oot_rms_norm() -> None:
    """vLLM keys an OOT CustomOp by the replaced class's name: "+RMSNorm" enables it."""
    from vllm.model_executor.layers.layernorm import RMSNorm

    from vllm_platform_template.custom_ops import register_custom_ops
    from vllm_platform_template.custom_ops.layernorm import TemplateRMSNorm

    register_custom_ops()
    assert RMSNorm.name == "rms_norm"
    assert [f"+{TemplateRMSNorm.name}"] == policy.custom_ops_for_road("custom_op", ["none"])


def test_unknown_providers_list_the_registered_ones() -> None:
    problems = policy.unknown_providers(
        {"rms_norm": ["my_kernl", "native"], "fused_add_rms_norm": None},
        {"rms_norm": ["native", "my_kernel"]},
    )
    assert problems == [
        "unknown provider 'my_kernl' for vLLM IR op 'rms_norm'; registered providers: "
        "my_kernel, native"
    ]

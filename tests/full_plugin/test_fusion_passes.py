"""The template's FX fusion passes on small graphs: counts, numerics, near misses."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
import vllm.ir.ops
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx
from vllm.compilation.passes.inductor_pass import pass_context
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.config.utils import Range
from vllm.ir import enable_torch_wrap

import vllm_platform_template.ir_impls  # noqa: F401  (registers template_cpu)
from vllm_platform_template.compiler.pass_manager import TemplatePassManager
from vllm_platform_template.compiler.passes.add_rms_norm import AddRMSNormFusionPass
from vllm_platform_template.compiler.passes.silu_and_mul import SiluAndMulFusionPass

EPS = 1e-5


@pytest.fixture(scope="module", autouse=True)
def vllm_cpu_kernels() -> None:
    """vLLM's passes reference ``torch.ops._C`` ops; load the CPU build's kernels."""
    from vllm_platform_template.devices.cpu import vllm_cpu_build

    build = vllm_cpu_build.load_cpu_kernels()
    if not build.loaded:
        pytest.skip(f"vLLM's CPU kernels: {build.reason}")


@pytest.fixture(scope="module")
def config() -> VllmConfig:
    return VllmConfig()


def trace(fn: Callable, *inputs: torch.Tensor) -> fx.GraphModule:
    """Functional aten graph with ``meta['val']``, IR ops kept as ``vllm_ir`` nodes."""
    with enable_torch_wrap(True):
        return make_fx(fn, tracing_mode="fake")(*inputs)


def count(gm: fx.GraphModule, target) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target == target)


def apply(pass_cls, config: VllmConfig, gm: fx.GraphModule) -> fx.GraphModule:
    with set_current_vllm_config(config), pass_context(Range(1, 64)):
        pass_cls(config)(gm.graph)
    gm.graph.lint()
    gm.recompile()
    return gm


# --- add + rms_norm ---------------------------------------------------------


def add_then_norm(x, residual, weight):
    summed = x + residual
    return vllm.ir.ops.rms_norm(summed, weight, EPS), summed


def residual_first(x, residual, weight):
    summed = residual + x
    return vllm.ir.ops.rms_norm(summed, weight, EPS), summed


def mul_then_norm(x, residual, weight):  # near miss: not a residual add
    summed = x * residual
    return vllm.ir.ops.rms_norm(summed, weight, EPS), summed


def other_epsilon(x, residual, weight):  # near miss: epsilon without a pattern
    summed = x + residual
    return vllm.ir.ops.rms_norm(summed, weight, 1e-3), summed


def rms_inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return (
        torch.randn(6, 32, dtype=dtype),
        torch.randn(6, 32, dtype=dtype),
        torch.randn(32, dtype=dtype),
    )


@pytest.mark.parametrize("fn", [add_then_norm, residual_first])
def test_add_rms_norm_fuses(config, fn) -> None:
    inputs = rms_inputs()
    gm = trace(fn, *inputs)
    assert count(gm, torch.ops.vllm_ir.rms_norm.default) == 1
    expected = gm(*inputs)
    apply(AddRMSNormFusionPass, config, gm)
    assert count(gm, torch.ops.vllm_ir.rms_norm.default) == 0
    assert count(gm, torch.ops.aten.add.Tensor) == 0
    assert count(gm, torch.ops.vllm_ir.fused_add_rms_norm.default) == 1
    for got, want in zip(gm(*inputs), expected, strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("fn", [mul_then_norm, other_epsilon])
def test_add_rms_norm_near_miss_is_left_alone(config, fn) -> None:
    gm = trace(fn, *rms_inputs())
    apply(AddRMSNormFusionPass, config, gm)
    assert count(gm, torch.ops.vllm_ir.fused_add_rms_norm.default) == 0
    assert count(gm, torch.ops.vllm_ir.rms_norm.default) == 1


# --- silu and mul ---------------------------------------------------------


def swiglu(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def swiglu_3d(x):
    d = x.shape[-1] // 2
    return x[..., d:] * F.silu(x[..., :d])


def swapped_halves(x):  # near miss: silu on the up half
    d = x.shape[-1] // 2
    return F.silu(x[..., d:]) * x[..., :d]


def separate_tensors(x, y):  # near miss: not the halves of one tensor
    return F.silu(x) * y


def gelu_gate(x):  # near miss: another activation
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d]) * x[..., d:]


def uneven_split(x):  # near miss: not the exact halves
    return F.silu(x[..., :3]) * x[..., 3:6]


SILU_AND_MUL = torch.ops.template.silu_and_mul.default


@pytest.mark.parametrize(("fn", "shape"), [(swiglu, (5, 16)), (swiglu_3d, (2, 3, 16))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_and_mul_fuses(config, fn, shape, dtype) -> None:
    x = torch.randn(*shape, dtype=dtype)
    gm = trace(fn, x)
    expected = gm(x)
    apply(SiluAndMulFusionPass, config, gm)
    assert count(gm, SILU_AND_MUL) == 1
    assert count(gm, torch.ops.aten.silu.default) == 0
    assert count(gm, torch.ops.aten.mul.Tensor) == 0
    torch.testing.assert_close(gm(x), expected)


@pytest.mark.parametrize("fn", [swapped_halves, gelu_gate, uneven_split])
def test_silu_and_mul_near_miss_is_left_alone(config, fn) -> None:
    x = torch.randn(4, 16)
    gm = trace(fn, x)
    apply(SiluAndMulFusionPass, config, gm)
    assert count(gm, SILU_AND_MUL) == 0


def test_silu_and_mul_separate_tensors_are_left_alone(config) -> None:
    gm = trace(separate_tensors, torch.randn(4, 8), torch.randn(4, 8))
    apply(SiluAndMulFusionPass, config, gm)
    assert count(gm, SILU_AND_MUL) == 0


# --- pass manager: fusion + lowering + donation ---------------------------------


def norm_and_keep_inputs(x, residual, weight):
    summed = x + residual
    out = vllm.ir.ops.rms_norm(summed, weight, EPS)
    return out, summed, x * 1.0, residual * 1.0  # x and residual used after the norm


def run_pass_manager(config: VllmConfig, gm: fx.GraphModule, stage: str) -> TemplatePassManager:
    config.additional_config["template"] = {"compile_stage": stage}
    manager = TemplatePassManager()
    with set_current_vllm_config(config), pass_context(Range(1, 64)):
        manager.configure(config)
        with (
            vllm.ir.ops.rms_norm.set_priority(["template_cpu", "native"]),
            vllm.ir.ops.fused_add_rms_norm.set_priority(["template_cpu", "native"]),
        ):
            manager(gm.graph)
    gm.recompile()
    return manager


def test_lowering_in_place_provider_keeps_live_inputs_intact() -> None:
    config = VllmConfig()
    inputs = rms_inputs()
    gm = trace(norm_and_keep_inputs, *inputs)
    expected = gm(*inputs)
    manager = run_pass_manager(config, gm, "fusion_only")
    assert manager.last_lowering["fused_add_rms_norm"]
    assert set(manager.last_lowering["fused_add_rms_norm"].values()) == {"template_cpu"}
    assert count(gm, torch.ops.vllm_ir.fused_add_rms_norm.default) == 0
    originals = [t.clone() for t in inputs]
    got = gm(*inputs)
    for g, w in zip(got, expected, strict=True):
        torch.testing.assert_close(g, w)
    for before, after in zip(originals, inputs, strict=True):
        torch.testing.assert_close(after, before)  # the in-place kernel wrote into clones


def test_stage_decides_silu_fusion() -> None:
    x = torch.randn(4, 16)
    fused = run_pass_manager(VllmConfig(), trace(swiglu, x), "fusion_only")
    kept = run_pass_manager(VllmConfig(), trace(swiglu, x), "graph")
    assert fused.match_counts["SiluAndMulFusionPass"] == 1
    assert "SiluAndMulFusionPass" not in kept.match_counts


def test_fusion_passes_per_stage() -> None:
    from vllm_platform_template.compiler.pass_manager import fusion_passes

    assert fusion_passes("fusion_only") == ("add_rms_norm", "silu_and_mul")
    assert fusion_passes("graph") == ("add_rms_norm",)

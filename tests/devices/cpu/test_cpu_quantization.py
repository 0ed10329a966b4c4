"""The template platforms accept the quantization they run and refuse the rest, saying why.

vLLM checks ``Platform.verify_quantization`` when it reads a checkpoint's config. The
template's platforms run compressed-tensors W8A8 INT8 (``quantization/int8_linear.py``)
on a device whose kernel table has ``w8a8_int8_linear``; any other method is refused
with the list of what runs (stock ``CpuPlatform`` lists none and lets every method
through, to fail later inside kernels it selects by ``is_cpu()``).
"""

from __future__ import annotations

import pytest
import torch
from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import (
    Int8ScaledMMLinearLayerConfig,
)
from vllm.platforms.cpu import CpuPlatform

from vllm_platform_template.devices.cpu import kernels
from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform
from vllm_platform_template.quantization.int8_linear import TemplateInt8LinearKernel
from vllm_platform_template.reference_kernels import int8_linear as reference


@pytest.mark.parametrize("method", ["gptq_marlin", "awq", "fp8", "bitsandbytes"])
def test_other_methods_are_refused_naming_what_runs(method: str) -> None:
    CpuPlatform.verify_quantization(method)  # stock: no list, every method passes
    with pytest.raises(ValueError, match=f"{method} quantization is not supported.*"
                       "compressed-tensors.*W8A8 INT8.*--quantized"):  # fmt: skip
        TemplateCpuPlatform.verify_quantization(method)


def test_compressed_tensors_is_accepted() -> None:
    TemplateCpuPlatform.verify_quantization("compressed-tensors")
    assert TemplateCpuPlatform.supported_quantization == ["compressed-tensors"]


@pytest.mark.parametrize(
    ("static", "symmetric", "reason"),
    [(True, True, "static input scales"), (False, False, "asymmetric")],
)
def test_the_int8_kernel_declines_what_it_cannot_run(static, symmetric, reason) -> None:
    config = Int8ScaledMMLinearLayerConfig(
        is_static_input_scheme=static, is_channelwise=True, input_symmetric=symmetric
    )
    ok, why = TemplateInt8LinearKernel.can_implement(config)
    assert not ok and reason in why
    dynamic = Int8ScaledMMLinearLayerConfig(
        is_static_input_scheme=False, is_channelwise=True, input_symmetric=True
    )
    assert TemplateInt8LinearKernel.can_implement(dynamic) == (True, None)


def test_cpu_int8_kernel_equals_the_reference_and_vllms_quantization() -> None:
    """torch._int_mm sums int8 products exactly: equal to the reference; the per-token
    quantization equals vLLM's own CPU kernel where vLLM's CPU build is loaded."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 512, generator=gen)
    weight = torch.randint(-127, 128, (384, 512), dtype=torch.int8, generator=gen)
    scale = torch.rand(384, generator=gen) / 100
    bias = torch.randn(384, generator=gen)
    got = kernels.w8a8_int8_linear(x, weight, scale, bias)
    torch.testing.assert_close(got, reference.w8a8_int8_linear(x, weight, scale, bias))
    # against fp32 activations: only the activations' int8 rounding (under 1 % here)
    exact = x @ (weight.float() * scale[:, None]).t() + bias
    assert float(torch.linalg.norm(got - exact) / torch.linalg.norm(exact)) < 0.01
    from vllm_platform_template.devices.cpu import vllm_cpu_build

    if not vllm_cpu_build.load_cpu_kernels().loaded:
        pytest.skip("vLLM's CPU build is not loaded here")
    from vllm import _custom_ops as ops

    q, x_scale, _ = ops.scaled_int8_quant(x, symmetric=True)
    want_q, want_scale = reference.per_token_quant_int8(x)
    assert torch.equal(x_scale.view(-1, 1), want_scale)
    assert (q.int() - want_q.int()).abs().max() <= 1  # vLLM multiplies by 127 / max first

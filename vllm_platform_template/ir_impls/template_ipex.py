"""Provider ``template_ipex``: Intel Extension for PyTorch kernels for vLLM IR ops.

Supported only when IPEX imports and was built for the installed torch (IPEX
2.8 needs torch 2.8); otherwise it registers as unsupported with the reason.
IPEX's kernels take a weight and no ``variance_size``; other calls fall
through to the next provider in the priority list.
"""

from __future__ import annotations

import torch
from torch import Tensor
from vllm import ir

from vllm_platform_template.ir_impls.status import PROVIDER_STATUS, ProviderStatus
from vllm_platform_template.kernels import ipex as ipex_kernels

PROVIDER = "template_ipex"
SUPPORTED, _REASON = ipex_kernels.status()
PROVIDER_STATUS[PROVIDER] = ProviderStatus(SUPPORTED, _REASON, "cpu")

_DTYPES = (torch.float32, torch.bfloat16)


def _rows_ok(x: Tensor, weight: Tensor | None) -> bool:
    return (
        x.device.type in ("cpu", "xpu")
        and x.dtype in _DTYPES
        and x.is_contiguous()
        and weight is not None
        and weight.dtype == x.dtype
        and weight.shape == x.shape[-1:]
    )


def rms_norm_supports(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> bool:
    return variance_size is None and _rows_ok(x, weight)


@ir.ops.rms_norm.register_impl(PROVIDER, supported=SUPPORTED, supports_args=rms_norm_supports)
def rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    assert weight is not None  # guaranteed by supports_args
    return ipex_kernels.rms_norm(x, weight, epsilon)


def fused_add_rms_norm_supports(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> bool:
    return (
        variance_size is None
        and _rows_ok(x, weight)
        and x_residual.shape == x.shape
        and x_residual.dtype == x.dtype
        and x_residual.is_contiguous()
    )


@ir.ops.fused_add_rms_norm.register_impl(
    PROVIDER, supported=SUPPORTED, supports_args=fused_add_rms_norm_supports
)
def fused_add_rms_norm(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    assert weight is not None
    return ipex_kernels.fused_add_rms_norm(x, x_residual, weight, epsilon)

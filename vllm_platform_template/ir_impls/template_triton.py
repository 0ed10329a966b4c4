"""Provider ``template_triton``: Triton kernels for vLLM IR ops on GPUs.

Supported only when Triton imports and a CUDA device is present; the kernels
(``kernels/triton``) are imported lazily on first call so that this module
costs nothing on CPU-only machines.
"""

from __future__ import annotations

import torch
from torch import Tensor
from vllm import ir

from vllm_platform_template.ir_impls.status import PROVIDER_STATUS, ProviderStatus
from vllm_platform_template.kernels.triton import triton_available

PROVIDER = "template_triton"
SUPPORTED, _REASON = triton_available()
PROVIDER_STATUS[PROVIDER] = ProviderStatus(SUPPORTED, _REASON, "cuda")

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _rows_ok(x: Tensor, weight: Tensor | None) -> bool:
    return (
        x.is_cuda
        and x.dtype in _DTYPES
        and x.dim() >= 1
        and x.stride(-1) == 1
        and (weight is None or (weight.dtype == x.dtype and weight.shape == x.shape[-1:]))
    )


def rms_norm_supports(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> bool:
    return _rows_ok(x, weight)


@ir.ops.rms_norm.register_impl(PROVIDER, supported=SUPPORTED, supports_args=rms_norm_supports)
def rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    from vllm_platform_template.kernels.triton import layernorm

    return layernorm.rms_norm(x, weight, epsilon, variance_size)


def fused_add_rms_norm_supports(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> bool:
    return (
        _rows_ok(x, weight)
        and x_residual.shape == x.shape
        and x_residual.dtype == x.dtype
        and x_residual.stride(-1) == 1
    )


@ir.ops.fused_add_rms_norm.register_impl(
    PROVIDER, supported=SUPPORTED, supports_args=fused_add_rms_norm_supports, inplace=True
)
def fused_add_rms_norm(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    from vllm_platform_template.kernels.triton import layernorm

    return layernorm.fused_add_rms_norm_(x, x_residual, weight, epsilon, variance_size)


def gelu_and_mul_sparse_supports(
    x: Tensor, std_multiplier: float, approximate: str = "none"
) -> bool:
    return x.is_cuda and x.dtype in _DTYPES and x.stride(-1) == 1 and x.shape[-1] % 2 == 0


@ir.ops.gelu_and_mul_sparse.register_impl(
    PROVIDER, supported=SUPPORTED, supports_args=gelu_and_mul_sparse_supports
)
def gelu_and_mul_sparse(x: Tensor, std_multiplier: float, approximate: str = "none") -> Tensor:
    from vllm_platform_template.kernels.triton import activation

    return activation.gelu_and_mul_sparse(x, std_multiplier, approximate)

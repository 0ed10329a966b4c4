"""Provider ``template_cpu``: the CPU reference backend's kernels for vLLM IR ops.

``rms_norm`` and ``fused_add_rms_norm`` call vLLM's vectorised CPU kernels
(in place for ``fused_add_rms_norm``: registered with ``inplace=True``, so
vLLM clones the activations for the functional overload and passes them
straight through for ``maybe_inplace``). ``gelu_and_mul_sparse`` uses a
one-reduction torch formulation. The C++ row kernels read rows as contiguous
memory: a strided input silently gives wrong results there, so
``supports_args`` sends non-contiguous inputs to the next provider.
"""

from __future__ import annotations

import torch
from torch import Tensor
from vllm import ir

from vllm_platform_template.ir_impls.status import PROVIDER_STATUS, ProviderStatus
from vllm_platform_template.kernels import cpu as cpu_kernels

PROVIDER = "template_cpu"
SUPPORTED = True  # every machine has a CPU; the kernels fall back to torch if vLLM's are absent
PROVIDER_STATUS[PROVIDER] = ProviderStatus(
    SUPPORTED, "CPU kernels (vLLM's C++ kernels when loaded in torch.ops._C, else torch)", "cpu"
)

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _rows_ok(x: Tensor, weight: Tensor | None) -> bool:
    """Layouts vLLM's C++ row kernels take: contiguous rows, SIMD-aligned length."""
    return (
        x.device.type == "cpu"
        and x.dtype in _DTYPES
        and x.dim() >= 1
        and x.is_contiguous()
        and x.shape[-1] > 0
        and x.shape[-1] % cpu_kernels.ROW_ALIGNMENT == 0
        and (weight is None or (weight.dtype == x.dtype and weight.shape == x.shape[-1:]))
    )


def rms_norm_supports(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> bool:
    return variance_size is None and _rows_ok(x, weight)


@ir.ops.rms_norm.register_impl(PROVIDER, supported=SUPPORTED, supports_args=rms_norm_supports)
def rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    return cpu_kernels.rms_norm(x, weight, epsilon)


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
    PROVIDER, supported=SUPPORTED, supports_args=fused_add_rms_norm_supports, inplace=True
)
def fused_add_rms_norm(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    return cpu_kernels.fused_add_rms_norm_(x, x_residual, weight, epsilon)


def gelu_and_mul_sparse_supports(
    x: Tensor, std_multiplier: float, approximate: str = "none"
) -> bool:
    return x.device.type == "cpu" and x.dtype in _DTYPES and x.shape[-1] % 2 == 0


@ir.ops.gelu_and_mul_sparse.register_impl(
    PROVIDER, supported=SUPPORTED, supports_args=gelu_and_mul_sparse_supports
)
def gelu_and_mul_sparse(x: Tensor, std_multiplier: float, approximate: str = "none") -> Tensor:
    return cpu_kernels.gelu_and_mul_sparse(x, std_multiplier, approximate)

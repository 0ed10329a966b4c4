"""Kernels of the CPU reference backend (the CPU device's kernel table, ``device.py``).

vLLM's CPU build ships vectorised C++ kernels (``torch.ops._C.rms_norm``,
``fused_add_rms_norm``, ``silu_and_mul``, ``rotary_embedding``) once a process
has loaded vLLM's CPU build for its ISA (``vllm_cpu_build``; the platform does so
in every worker through ``Platform.import_kernels``). This module uses them when they are loaded and
otherwise falls back to vectorised torch with the same semantics, so it imports
and runs without vLLM. A vendor replaces these bodies with calls into its own
kernel library.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# the reference experts kernel (every expert on every token), re-exported as the CPU's
from vllm_platform_template.reference_kernels import fused_moe as reference_moe
from vllm_platform_template.reference_kernels.fused_moe import fused_moe as fused_moe
from vllm_platform_template.reference_kernels.int8_linear import per_token_quant_int8
from vllm_platform_template.reference_kernels.supports import RowKernels

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# vLLM's CPU kernels process rows in SIMD vectors and reject (TORCH_CHECK) row
# lengths that are not a multiple of the vector width; 16 covers every ISA.
ROW_ALIGNMENT = 16


def check_rows(
    op: str, x: torch.Tensor, weight: torch.Tensor | None, residual: torch.Tensor | None = None
) -> None:
    """Raise ValueError, before any kernel runs, for arguments no kernel may be given."""
    if x.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{op}: x must be float32, bfloat16 or float16, got {x.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{op}: x must have a hidden dimension, got a scalar")
    if weight is not None and (weight.shape != x.shape[-1:] or weight.dtype != x.dtype):
        raise ValueError(
            f"{op}: weight must be [{x.shape[-1]}] {x.dtype} like x's last dimension, got "
            f"{list(weight.shape)} {weight.dtype}"
        )
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError(
            f"{op}: residual must match x ({list(x.shape)} {x.dtype}), got "
            f"{list(residual.shape)} {residual.dtype}"
        )


def c_kernel_layout(*tensors: torch.Tensor) -> bool:
    """Whether vLLM's C++ row kernels can take these tensors (else torch is used)."""
    return all(
        t.device.type == "cpu" and t.is_contiguous() and t.shape[-1] % ROW_ALIGNMENT == 0
        for t in tensors
    )


def vllm_cpu_op(name: str):
    """``torch.ops._C.<name>`` if vLLM's CPU kernels are loaded, else None."""
    namespace = torch.ops._C
    try:
        return getattr(namespace, name) if hasattr(namespace, name) else None
    except (AttributeError, RuntimeError):
        return None


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> torch.Tensor:
    """RMSNorm over the last dimension (vLLM IR ``rms_norm`` without ``variance_size``)."""
    if variance_size is not None:
        raise ValueError("rms_norm: the CPU kernels do not take variance_size")
    check_rows("rms_norm", x, weight)
    op = vllm_cpu_op("rms_norm")
    if op is not None and c_kernel_layout(x):
        out = torch.empty_like(x)
        op(out, x, weight, epsilon)
        return out
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon)
    if weight is not None:
        return (y.to(weight.dtype) * weight).to(x.dtype)
    return y.to(x.dtype)


def fused_add_rms_norm_(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: ``residual += x``; ``x = rms_norm(residual) * weight``. Returns (x, residual)."""
    if variance_size is not None:
        raise ValueError("fused_add_rms_norm: the CPU kernels do not take variance_size")
    check_rows("fused_add_rms_norm", x, weight, residual)
    op = vllm_cpu_op("fused_add_rms_norm")
    if op is not None and c_kernel_layout(x, residual):
        op(x, residual, weight, epsilon)
        return x, residual
    summed = x.float() + residual.float()
    residual.copy_(summed)
    y = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + epsilon)
    x.copy_((y.to(weight.dtype) * weight) if weight is not None else y)
    return x, residual


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]``; vLLM's kernel when loaded, else torch."""
    if x.dim() < 1 or x.shape[-1] % 2:
        raise ValueError(f"silu_and_mul: the last dimension must be even, got {list(x.shape)}")
    d = x.shape[-1] // 2
    op = vllm_cpu_op("silu_and_mul")
    if (
        op is not None
        and x.dtype in _FLOAT_DTYPES
        and c_kernel_layout(x)
        and d % ROW_ALIGNMENT == 0
    ):
        out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
        op(out, x)
        return out
    return F.silu(x[..., :d]) * x[..., d:]


def gelu_and_mul_sparse(
    x: torch.Tensor, std_multiplier: float, approximate: str = "none"
) -> torch.Tensor:
    """Gaussian-sparsified GELU and multiply; one reduction over the gate half.

    Same math as the native op, with the mean and standard deviation from one
    fused ``torch.std_mean`` reduction instead of two passes.
    """
    d = x.shape[-1] // 2
    gate = x[..., :d]
    std, mean = torch.std_mean(gate, dim=-1, keepdim=True, correction=0)
    sparse_gate = F.relu(gate - (mean + std * std_multiplier))
    return F.gelu(sparse_gate, approximate=approximate) * x[..., d:]


def rotary_embedding_(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
) -> None:
    """Rotate ``query``/``key`` in place (vLLM's kernel), or raise if it is not loaded."""
    op = vllm_cpu_op("rotary_embedding")
    if op is None:
        raise RuntimeError("vLLM's CPU rotary_embedding kernel is not loaded")
    op(positions, query, key, head_size, cos_sin_cache, is_neox_style)


def w8a8_int8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """W8A8 INT8 linear: ``x`` quantized per token, torch's int8 GEMM (``torch._int_mm``:
    oneDNN's VNNI kernel on x86) on the ``[N, K]`` weight's transposed view, then both
    scales; the reference's semantics."""
    q, x_scale = per_token_quant_int8(x)
    accumulated = torch._int_mm(q, weight.t())
    out = accumulated.float() * x_scale * weight_scale.view(1, -1)
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)


def fused_moe_w8a8_int8(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w13_scale: torch.Tensor,
    w2: torch.Tensor,
    w2_scale: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    """W8A8 INT8 experts: the reference's experts kernel (every expert on every token)
    with each projection on :func:`w8a8_int8_linear`; the reference's semantics."""
    return reference_moe.fused_moe_w8a8_int8(
        x, router_logits, w13, w13_scale, w2, w2_scale, top_k, renormalize, w8a8_int8_linear
    )


# --- which calls the kernels take (the kernel table's ``supports``) ------------------
# vLLM's C++ row kernels read rows as contiguous memory (a strided input silently gives
# wrong results there, so such calls go to the next provider) in SIMD-aligned lengths;
# the sparse GELU is plain torch.
ROWS = RowKernels(
    device_types=("cpu",),
    dtypes=_FLOAT_DTYPES,
    row_alignment=ROW_ALIGNMENT,
    activation_any_layout=True,
)
rms_norm_supports = ROWS.rms_norm_supports
fused_add_rms_norm_supports = ROWS.fused_add_rms_norm_supports
gelu_and_mul_sparse_supports = ROWS.gelu_and_mul_sparse_supports

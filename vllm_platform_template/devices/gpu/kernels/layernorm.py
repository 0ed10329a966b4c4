"""RMSNorm kernels: ``rms_norm`` and the in-place ``fused_add_rms_norm_``.

Semantics are vLLM IR's native ``rms_norm`` / ``fused_add_rms_norm``, cast order
included, for each row ``x`` of the last dimension (``H`` channels)::

    x   = float32(x) [+ float32(residual)]      # residual <- x.to(dtype) (fused op)
    var = mean(x[:variance_size] ** 2)          # variance_size defaults to H
    y   = x * rsqrt(var + epsilon)
    y   = (y.to(weight.dtype) * weight)         # when weight is given
    out = y.to(dtype)

The variance covers the first ``variance_size`` channels; the normalisation
applies to all ``H``. One pass over memory: each program keeps its rows in
registers (reads ``x`` and ``residual`` once, writes once). Rows longer than
:data:`MAX_SINGLE_PASS_BLOCK` elements fall back to two passes over
:data:`MULTI_PASS_BLOCK`-wide chunks (the second read mostly hits L2).
Several rows share a program when ``H`` is small.

vLLM hooks served: the IR ops ``rms_norm`` / ``fused_add_rms_norm`` (provider
``template_triton``) and the ``RMSNorm`` CustomOp, through ``device.py``'s kernel
table. Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py``, the conformance
kit and, on the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import (
    check_dtype,
    check_last_dim_contiguous,
    check_launch_device,
    next_power_of_2,
)

__all__ = [
    "MAX_SINGLE_PASS_BLOCK",
    "MULTI_PASS_BLOCK",
    "RowLaunchConfig",
    "fused_add_rms_norm_",
    "rms_norm",
    "row_launch_config",
]

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

MAX_SINGLE_PASS_BLOCK = 32768
"""Widest row (elements, rounded up to a power of two) kept in registers in one pass.

On an H100 (bf16, hidden 32768) one pass reached 93-97% of copy bandwidth, two
passes over 2048-8192-wide chunks 65-68%.
"""

MULTI_PASS_BLOCK = 4096
"""Chunk width of the two-pass path for rows wider than :data:`MAX_SINGLE_PASS_BLOCK`."""


@dataclass(frozen=True)
class RowLaunchConfig:
    """How a row-wise kernel is launched for one hidden size."""

    block_n: int  # columns per tile (power of two)
    block_m: int  # rows per program (power of two)
    num_warps: int
    single_pass: bool  # whole row in one tile


def row_launch_config(hidden_size: int) -> RowLaunchConfig:
    """Tile and warp count for row-wise kernels over ``hidden_size`` channels.

    The row is one power-of-two tile when it fits :data:`MAX_SINGLE_PASS_BLOCK`;
    short rows are packed several to a program (about 2048 elements a program),
    and the warp count grows with the tile (4 / 8 / 16 / 32 warps) so that each
    thread holds a few 16-byte vectors.
    """
    if hidden_size <= 0:
        raise ValueError(f"hidden size must be positive, got {hidden_size}")
    block_n = next_power_of_2(hidden_size)
    single_pass = block_n <= MAX_SINGLE_PASS_BLOCK
    if not single_pass:
        block_n = MULTI_PASS_BLOCK
    block_m = max(1, min(16, 2048 // block_n)) if single_pass else 1
    elements = block_m * block_n
    if elements >= 32768 and torch.version.hip is None:
        num_warps = 32  # measured on H100: 25% faster than 16 at 32768 (AMD allows 16 at most)
    elif elements >= 8192:
        num_warps = 16
    elif elements >= 2048:
        num_warps = 8
    else:
        num_warps = 4
    return RowLaunchConfig(block_n, block_m, num_warps, single_pass)


@triton.jit
def _scale_by_weight(y, w_ptr, cols, col_mask, HAS_WEIGHT: tl.constexpr):
    """``y.to(weight.dtype) * weight`` with torch's rounding (fp32 product, one rounding)."""
    if HAS_WEIGHT:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0)
        w_dtype = w_ptr.dtype.element_ty
        y = (y.to(w_dtype).to(tl.float32) * w.to(tl.float32)[None, :]).to(w_dtype)
    return y


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    x_row_stride,
    res_ptr,
    res_row_stride,
    out_ptr,
    out_row_stride,
    w_ptr,
    num_rows,
    n_cols,
    var_size,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    SINGLE_PASS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < num_rows
    rows = rows.to(tl.int64)
    x_rows = x_ptr + rows[:, None] * x_row_stride
    res_rows = res_ptr + rows[:, None] * res_row_stride
    out_rows = out_ptr + rows[:, None] * out_row_stride
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_PASS:
        col_mask = cols < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            x += tl.load(res_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            tl.store(res_rows + cols[None, :], x.to(res_ptr.dtype.element_ty), mask=mask)
        x_var = tl.where((cols < var_size)[None, :], x, 0.0)
        rstd = tl.math.rsqrt(tl.sum(x_var * x_var, axis=1) / var_size + eps)
        y = _scale_by_weight(x * rstd[:, None], w_ptr, cols, col_mask, HAS_WEIGHT)
        tl.store(out_rows + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        # Pass 1: sum of squares over the first var_size channels (no writes).
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, var_size, BLOCK_N):
            c = start + cols
            mask = row_mask[:, None] & (c < var_size)[None, :]
            x = tl.load(x_rows + c[None, :], mask=mask, other=0.0).to(tl.float32)
            if HAS_RESIDUAL:
                x += tl.load(res_rows + c[None, :], mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.math.rsqrt(tl.sum(acc, axis=1) / var_size + eps)
        # Pass 2: re-read, write residual and output chunk by chunk (each chunk is
        # read before it is overwritten, so in-place aliasing is safe).
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            col_mask = c < n_cols
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + c[None, :], mask=mask, other=0.0).to(tl.float32)
            if HAS_RESIDUAL:
                x += tl.load(res_rows + c[None, :], mask=mask, other=0.0).to(tl.float32)
                tl.store(res_rows + c[None, :], x.to(res_ptr.dtype.element_ty), mask=mask)
            y = _scale_by_weight(x * rstd[:, None], w_ptr, c, col_mask, HAS_WEIGHT)
            tl.store(out_rows + c[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def _check_common(
    op: str, x: torch.Tensor, weight: torch.Tensor | None, variance_size: int | None
) -> int:
    """Validate ``x``/``weight``/``variance_size``; returns the variance width."""
    if x.dim() == 0:
        raise ValueError(f"{op}: x must have at least one dimension")
    check_dtype(op, "x", x, FLOAT_DTYPES)
    check_last_dim_contiguous(op, "x", x)
    hidden = x.shape[-1]
    if hidden == 0:
        raise ValueError(f"{op}: x has an empty last dimension")
    if weight is not None:
        check_dtype(op, "weight", weight, FLOAT_DTYPES)
        if tuple(weight.shape) != (hidden,):
            raise ValueError(
                f"{op}: weight has shape {tuple(weight.shape)}, expected ({hidden},) "
                "(one scale per channel of x's last dimension)"
            )
        check_last_dim_contiguous(op, "weight", weight)
    if variance_size is None:
        return hidden
    if not 0 < variance_size <= hidden:
        raise ValueError(f"{op}: variance_size must be in [1, {hidden}], got {variance_size}")
    return int(variance_size)


def _rows_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` as a ``[rows, H]`` view sharing storage, or None when no such view exists."""
    try:
        return t.view(-1, t.shape[-1])
    except RuntimeError:
        return None


def _launch(
    x2: torch.Tensor,
    res2: torch.Tensor | None,
    out2: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    var_size: int,
) -> None:
    num_rows, hidden = x2.shape
    cfg = row_launch_config(hidden)
    res = res2 if res2 is not None else x2
    grid = (triton.cdiv(num_rows, cfg.block_m),)
    _rms_norm_kernel[grid](
        x2,
        x2.stride(0),
        res,
        res.stride(0),
        out2,
        out2.stride(0),
        weight if weight is not None else x2,
        num_rows,
        hidden,
        var_size,
        float(epsilon),
        HAS_RESIDUAL=res2 is not None,
        HAS_WEIGHT=weight is not None,
        SINGLE_PASS=cfg.single_pass,
        BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n,
        num_warps=cfg.num_warps,
    )


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> torch.Tensor:
    """RMSNorm over the last dimension of ``x``; returns a new contiguous tensor.

    ``x``: ``[..., H]`` float32/bfloat16/float16 with a contiguous last dimension
    (rows may be strided). ``weight``: ``[H]`` or None. ``variance_size``: the
    variance uses channels ``[0, variance_size)`` only.
    """
    op = "rms_norm"
    var_size = _check_common(op, x, weight, variance_size)
    check_launch_device(_rms_norm_kernel, op, x, weight)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x2 = _rows_view(x)
    if x2 is None:  # leading dims not collapsible into one row stride: copy once
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
    _launch(x2, None, out.view(-1, x.shape[-1]), weight, epsilon, var_size)
    return out


def fused_add_rms_norm_(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: ``residual <- x + residual``; ``x <- rms_norm(x + residual)``.

    The sum is taken in float32; ``residual`` receives it rounded to its dtype
    and the normalisation uses the float32 sum (as vLLM's native op). Returns
    ``(x, residual)``, the same tensors. Both must have the same shape and dtype,
    and rows that can be addressed with one row stride (``t.view(-1, H)`` works).
    """
    op = "fused_add_rms_norm_"
    var_size = _check_common(op, x, weight, variance_size)
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError(
            f"{op}: residual must match x in shape and dtype; x is {tuple(x.shape)} "
            f"{x.dtype}, residual is {tuple(residual.shape)} {residual.dtype}"
        )
    check_last_dim_contiguous(op, "residual", residual)
    check_launch_device(_rms_norm_kernel, op, x, residual, weight)
    if x.numel() == 0:
        return x, residual
    x2 = _rows_view(x)
    res2 = _rows_view(residual)
    for name, view in (("x", x2), ("residual", res2)):
        if view is None:
            raise ValueError(
                f"{op}: {name} is updated in place, so its rows must be addressable with "
                f"one stride ({name}.view(-1, {x.shape[-1]}) must work); pass a contiguous "
                "tensor"
            )
    assert x2 is not None and res2 is not None
    if x2.data_ptr() == res2.data_ptr():
        raise ValueError(f"{op}: x and residual must not share memory")
    _launch(x2, res2, x2, weight, epsilon, var_size)
    return x, residual

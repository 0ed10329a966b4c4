"""Gated activation kernels: ``silu_and_mul`` and ``gelu_and_mul_sparse``.

For ``x = [..., 2d]`` with gate ``g = x[..., :d]`` and up ``u = x[..., d:]``:

- ``silu_and_mul(x) = silu(g) * u``;
- ``gelu_and_mul_sparse(x, m, approximate) = gelu(relu(g - (mean(g) + m * std(g)))) * u``
  where ``mean``/``std`` (biased) are taken over the ``d`` gate channels of each
  row and ``gelu`` is the erf form (``approximate="none"``) or the tanh form.

Both compute in float32 and round once to ``x.dtype`` (vLLM's native ops round
after every step in the input dtype, so low-precision results differ by about
one ulp). Rows may be strided; the last dimension must be contiguous.
``silu_and_mul`` tiles each row across programs; ``gelu_and_mul_sparse`` needs
the whole gate row for its statistics, so one program owns a row.

vLLM hooks served: the ``SiluAndMul`` CustomOp and the fused model
(``silu_and_mul``) and the IR op ``gelu_and_mul_sparse``, through ``device.py``'s
kernel table. Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on
the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import (
    check_dtype,
    check_last_dim_contiguous,
    check_launch_device,
    next_power_of_2,
)

__all__ = ["gelu_and_mul_sparse", "silu_and_mul"]

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

SILU_MAX_BLOCK = 2048
"""Columns per ``silu_and_mul`` program."""

GELU_MAX_SINGLE_PASS_BLOCK = 8192
"""Widest gate row held in registers by ``gelu_and_mul_sparse`` (else three passes).

Measured on H100 (bf16, 4096 x 2 * 14336): one 16384-wide pass keeps so many
registers live that occupancy drops (59% of copy bandwidth); three passes over
2048-wide chunks, the repeated gate reads hitting L2, reach 81%.
"""

GELU_MULTI_PASS_BLOCK = 2048


@triton.jit
def _silu_and_mul_kernel(x_ptr, x_row_stride, out_ptr, out_row_stride, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    x_row = x_ptr + row * x_row_stride
    g = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_row + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gelu(x, APPROX_TANH: tl.constexpr):
    if APPROX_TANH:
        # tanh(z) = 1 - 2 / (exp(2z) + 1): saturates correctly at +-inf, needs no libdevice.
        z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        t = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)
        return 0.5 * x * (1.0 + t)
    else:
        return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))


@triton.jit
def _threshold(mean, std, std_multiplier, DTYPE: tl.constexpr):
    """``mean + std * std_multiplier`` rounded to the input dtype at each step, as the
    native op does on low-precision tensors (so the sparsity mask matches it)."""
    scaled = (std.to(DTYPE).to(tl.float32) * std_multiplier).to(DTYPE).to(tl.float32)
    return (mean.to(DTYPE).to(tl.float32) + scaled).to(DTYPE).to(tl.float32)


@triton.jit
def _gated_gelu(g, threshold, u, APPROX_TANH: tl.constexpr, DTYPE: tl.constexpr):
    """``gelu(relu(g - threshold)) * u`` with the native op's intermediate roundings."""
    sparse = tl.maximum((g - threshold).to(DTYPE).to(tl.float32), 0.0)
    return (_gelu(sparse, APPROX_TANH).to(DTYPE).to(tl.float32) * u).to(DTYPE)


@triton.jit
def _gelu_and_mul_sparse_kernel(
    x_ptr,
    x_row_stride,
    out_ptr,
    out_row_stride,
    d,
    std_multiplier,
    APPROX_TANH: tl.constexpr,
    SINGLE_PASS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK)
    if SINGLE_PASS:
        mask = cols < d
        g = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(g, axis=0) / d
        centered = tl.where(mask, g - mean, 0.0)
        std = tl.sqrt(tl.sum(centered * centered, axis=0) / d)
        threshold = _threshold(mean, std, std_multiplier, out_ptr.dtype.element_ty)
        u = tl.load(x_row + d + cols, mask=mask, other=0.0).to(tl.float32)
        y = _gated_gelu(g, threshold, u, APPROX_TANH, out_ptr.dtype.element_ty)
        tl.store(out_row + cols, y, mask=mask)
    else:
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, d, BLOCK):
            c = start + cols
            total += tl.load(x_row + c, mask=c < d, other=0.0).to(tl.float32)
        mean = tl.sum(total, axis=0) / d
        sq = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, d, BLOCK):
            c = start + cols
            g = tl.load(x_row + c, mask=c < d, other=0.0).to(tl.float32)
            centered = tl.where(c < d, g - mean, 0.0)
            sq += centered * centered
        std = tl.sqrt(tl.sum(sq, axis=0) / d)
        threshold = _threshold(mean, std, std_multiplier, out_ptr.dtype.element_ty)
        for start in range(0, d, BLOCK):
            c = start + cols
            mask = c < d
            g = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
            u = tl.load(x_row + d + c, mask=mask, other=0.0).to(tl.float32)
            y = _gated_gelu(g, threshold, u, APPROX_TANH, out_ptr.dtype.element_ty)
            tl.store(out_row + c, y, mask=mask)


def _gated_rows(op: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Validate ``x``; return (``x`` as [rows, 2d] view or copy, output [..., d], d)."""
    if x.dim() == 0:
        raise ValueError(f"{op}: x must have at least one dimension")
    check_dtype(op, "x", x, FLOAT_DTYPES)
    check_last_dim_contiguous(op, "x", x)
    if x.shape[-1] % 2 != 0:
        raise ValueError(
            f"{op}: the last dimension of x ({x.shape[-1]}) must be even: gate and up halves"
        )
    d = x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    try:
        x2 = x.view(-1, x.shape[-1])
    except RuntimeError:  # leading dims not collapsible into one row stride: copy once
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
    return x2, out, d


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` with ``d = x.shape[-1] // 2``; new tensor ``[..., d]``."""
    op = "silu_and_mul"
    x2, out, d = _gated_rows(op, x)
    check_launch_device(_silu_and_mul_kernel, op, x)
    if out.numel() == 0:
        return out
    block = min(next_power_of_2(d), SILU_MAX_BLOCK)
    grid = (x2.shape[0], triton.cdiv(d, block))
    _silu_and_mul_kernel[grid](
        x2, x2.stride(0), out, d, d, BLOCK=block, num_warps=4 if block <= 1024 else 8
    )
    return out


def gelu_and_mul_sparse(
    x: torch.Tensor, std_multiplier: float, approximate: str = "none"
) -> torch.Tensor:
    """GELU of the sparsified gate times up (vLLM IR ``gelu_and_mul_sparse``); new tensor.

    ``approximate``: ``"none"`` (erf GELU) or ``"tanh"``.
    """
    op = "gelu_and_mul_sparse"
    if approximate not in ("none", "tanh"):
        raise ValueError(f"{op}: approximate must be 'none' or 'tanh', got {approximate!r}")
    x2, out, d = _gated_rows(op, x)
    check_launch_device(_gelu_and_mul_sparse_kernel, op, x)
    if out.numel() == 0:
        return out
    block = next_power_of_2(d)
    single_pass = block <= GELU_MAX_SINGLE_PASS_BLOCK
    if not single_pass:
        block = GELU_MULTI_PASS_BLOCK
    # Measured on H100 (bf16): 4 warps up to 4096 columns, 8 at 8192, 16 for the chunked path.
    num_warps = 4 if block <= 4096 else 8
    if not single_pass:
        num_warps = 16
    _gelu_and_mul_sparse_kernel[(x2.shape[0],)](
        x2,
        x2.stride(0),
        out,
        d,
        d,
        float(std_multiplier),
        APPROX_TANH=approximate == "tanh",
        SINGLE_PASS=single_pass,
        BLOCK=block,
        num_warps=num_warps,
    )
    return out

"""W8A8 INT8 linear: per-token activation quantization and an int8 GEMM with its scales.

``w8a8_int8_linear(x [M, K], weight [N, K] int8, weight_scale [N] fp32, bias)`` with the
reference's semantics (``reference_kernels/int8_linear.py``): each row of ``x`` is
quantized symmetrically to int8 with its own scale (one program a row, two passes over
it: the row's largest magnitude, then the rounded values); the GEMM multiplies int8
tiles into int32 accumulators (``tl.dot``: the tensor cores' int8 path) and its epilogue
applies the row's and the column's scales and the bias, rounding once to ``x``'s dtype.
The weight stays in the checkpoint's ``[N, K]`` layout: the tensor cores' 8-bit
instructions read both operands K-contiguous.

Tiles by the number of rows: decode (``M <= 16``) reads the weight once with narrow
column tiles, so that enough programs stream it (the step is bound by the weight's
bytes); larger ``M`` uses square tiles. No host sync, fixed grids per shape: a graph may
hold it.

vLLM hook served: the W8A8 INT8 linear layers (``quantization/int8_linear.py``) through
``device.py``'s kernel table. Proven by
``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py``
(the interpreter against the reference) and ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import check_launch_device, is_interpreted

__all__ = ["per_token_quant_int8", "w8a8_int8_linear"]

QUANT_BLOCK = 1024
"""Columns per step of the quantization kernel's passes over a row."""


@triton.jit
def _per_token_quant_kernel(
    x_ptr, x_row_stride, q_ptr, scale_ptr, K, BLOCK: tl.constexpr, INTERPRETED: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    cols = tl.arange(0, BLOCK)
    largest = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, K, BLOCK):
        c = start + cols
        v = tl.load(x_row + c, mask=c < K, other=0.0).to(tl.float32)
        largest = tl.maximum(largest, tl.abs(v))
    # IEEE divisions (Triton's "/" on fp32 is the approximate one): the scales and the
    # rounded values equal the reference's bit for bit
    scale = tl.math.div_rn(tl.max(largest, axis=0), 127.0)
    inverse = tl.where(scale > 0, tl.math.div_rn(1.0, scale), 0.0)
    for start in range(0, K, BLOCK):
        c = start + cols
        v = tl.load(x_row + c, mask=c < K, other=0.0).to(tl.float32)
        scaled = v * inverse
        # round half to even, as torch.round and vLLM's kernels; the interpreter has no
        # libdevice: adding and taking away 1.5 * 2**23 rounds |x| < 2**22 the same way
        if INTERPRETED:
            rounded = (scaled + 12582912.0) - 12582912.0
        else:
            rounded = tl.extra.cuda.libdevice.rint(scaled)
        q = tl.clamp(rounded, -128.0, 127.0)
        tl.store(q_ptr + row * K + c, q.to(tl.int8), mask=c < K)
    tl.store(scale_ptr + row, scale)


@triton.jit
def _int8_gemm_kernel(
    a_ptr,
    b_ptr,
    a_scale_ptr,
    b_scale_ptr,
    bias_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_bn,
    stride_om,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(0)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None].to(tl.int64) * K + ks[None, :]
    b_tile = b_ptr + cols[None, :].to(tl.int64) * stride_bn + ks[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
    for start in range(0, K, BLOCK_K):
        k_ok = start + ks < K
        a = tl.load(a_tile, mask=(rows[:, None] < M) & k_ok[None, :], other=0)
        b = tl.load(b_tile, mask=k_ok[:, None] & (cols[None, :] < N), other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_tile += BLOCK_K
        b_tile += BLOCK_K
    a_scale = tl.load(a_scale_ptr + rows, mask=rows < M, other=0.0)
    b_scale = tl.load(b_scale_ptr + cols, mask=cols < N, other=0.0)
    out = acc.to(tl.float32) * a_scale[:, None] * b_scale[None, :]
    if HAS_BIAS:
        out += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    o = out_ptr + rows[:, None].to(tl.int64) * stride_om + cols[None, :]
    tl.store(o, out.to(out_ptr.dtype.element_ty), mask=mask)


def gemm_tiles(m: int, n: int) -> tuple[int, int, int, int, int]:
    """``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)`` for ``m`` rows and ``n``
    columns: the fastest of a sweep on an H200 (``benchmarks/gpu_quantized_moe.py
    --sweep``, Llama-3-8B's layers at 1 and 32 rows). Decode streams the weight: narrow
    column tiles deep in K give enough programs for layers up to 6144 wide; wide layers
    (the fused gate/up projection) take wide tiles."""
    wide = n >= 16384
    if m <= 16:
        return (16, 128, 256, 4, 3) if wide else (16, 32, 512, 4, 4)
    if m <= 32:
        return (32, 128, 128, 4, 4) if wide else (32, 32, 512, 4, 4)
    if m <= 64:
        return 64, 64, 128, 4, 4
    return 128, 128, 64, 8, 3


def per_token_quant_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q [M, K] int8, scale [M, 1] fp32)`` of ``x`` (the reference's semantics)."""
    check_launch_device(_per_token_quant_kernel, "per_token_quant_int8", x)
    if x.stride(-1) != 1:
        x = x.contiguous()
    m, k = x.shape
    q = torch.empty((m, k), dtype=torch.int8, device=x.device)
    scale = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    if m:
        _per_token_quant_kernel[(m,)](
            x,
            x.stride(0),
            q,
            scale,
            k,
            BLOCK=min(QUANT_BLOCK, triton.next_power_of_2(k)),
            INTERPRETED=is_interpreted(_per_token_quant_kernel),
        )
    return q, scale


def w8a8_int8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x @ (weight * weight_scale) + bias``, ``x`` quantized per token (see the module)."""
    if weight.dtype != torch.int8 or weight.dim() != 2 or weight.stride(1) != 1:
        raise ValueError(
            f"w8a8_int8_linear: weight must be [N, K] int8 with contiguous rows, got "
            f"{list(weight.shape)} {weight.dtype} strides {weight.stride()}"
        )
    if x.shape[-1] != weight.shape[1] or weight_scale.numel() != weight.shape[0]:
        raise ValueError(
            f"w8a8_int8_linear: x {list(x.shape)}, weight {list(weight.shape)} and "
            f"weight_scale {list(weight_scale.shape)} do not fit"
        )
    q, x_scale = per_token_quant_int8(x)
    m, k = q.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m == 0:
        return out
    block_m, block_n, block_k, warps, stages = gemm_tiles(m, n)
    grid = (triton.cdiv(n, block_n), triton.cdiv(m, block_m))
    _int8_gemm_kernel[grid](
        q,
        weight,
        x_scale,
        weight_scale,
        bias if bias is not None else x_scale,
        out,
        m,
        n,
        k,
        weight.stride(0),
        out.stride(0),
        HAS_BIAS=bias is not None,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        num_warps=warps,
        num_stages=stages,
    )
    return out

"""Fused mixture of experts: top-k routing, then a grouped GEMM per expert, twice.

``fused_moe(x [T, H], router_logits [T, E], w13 [E, 2I, H], w2 [E, H, I], top_k,
renormalize)`` with the reference's semantics (``reference_kernels/fused_moe.py``):

1. routing in torch (softmax in fp32, top-k, renormalised): ``T * top_k`` (token,
   expert) pairs with their weights;
2. grouping without a host sync: the pairs sorted by expert, each expert's run padded
   to a multiple of ``BLOCK_M``, into a buffer sized for the worst case
   (``T * top_k + E * (BLOCK_M - 1)`` slots); each ``BLOCK_M`` block belongs to one
   expert (``block_expert``, -1 past the end);
3. ``_grouped_gemm_kernel`` over the blocks: gate/up = ``x[token] @ w13[e]^T`` for
   every pair, one weight tile read per block of the expert's pairs (not per pair);
4. the SiLU-and-mul of the gate and up halves (the activation kernel);
5. the same GEMM with ``w2[e]``, each pair's row scaled by its routing weight;
6. the ``top_k`` rows of each token summed.

Fixed grids for a given ``T`` (the block count is the worst case; empty blocks return
at once) and no host sync: a graph may hold it. Bf16/fp16/fp32; fp32 accumulation.

``fused_moe_w8a8_int8`` (W8A8 INT8 experts, ``w13``/``w2`` int8 with per-output-channel
fp32 scales) runs the same steps on int8 operands: ``x`` quantized per token before
step 3 and the activated rows per pair before step 5 (``int8_linear``'s quantization
kernel), int8 tensor-core products summed in int32, both scales applied in the GEMM's
epilogue.

vLLM hook served: the MoE layers' monolithic method (``moe/fused_moe_method.py``)
through ``device.py``'s kernel table. Proven by
``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and
``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import check_launch_device
from vllm_platform_template.devices.gpu.kernels.activation import silu_and_mul
from vllm_platform_template.devices.gpu.kernels.int8_linear import per_token_quant_int8
from vllm_platform_template.reference_kernels.fused_moe import route_topk_softmax

__all__ = ["block_m", "fused_moe", "fused_moe_w8a8_int8", "gemm_tiles", "group_by_expert"]


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    w_ptr,
    out_ptr,
    pair_ptr,
    block_expert_ptr,
    weight_ptr,
    a_scale_ptr,
    w_scale_ptr,
    num_pairs,
    N,
    K,
    stride_am,
    stride_we,
    stride_wn,
    stride_wse,
    stride_om,
    A_ROW_DIVISOR: tl.constexpr,
    MUL_WEIGHT: tl.constexpr,
    SCALED: tl.constexpr,
    ACC_DTYPE: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """``out[pair] = a[pair // A_ROW_DIVISOR] @ w[e]^T`` (times the pair's routing weight
    when ``MUL_WEIGHT``) for the pairs of block ``program_id(1)``, all of expert ``e``.
    ``SCALED`` (int8 ``a`` and ``w``, int32 ``ACC_DTYPE``): the sum times the ``a`` row's
    scale and the output channel's scale of ``w[e]``."""
    block = tl.program_id(1)
    expert = tl.load(block_expert_ptr + block)
    if expert < 0:
        return
    pid_n = tl.program_id(0)
    slots = block * BLOCK_M + tl.arange(0, BLOCK_M)
    pairs = tl.load(pair_ptr + slots)
    valid = pairs < num_pairs
    a_rows = (pairs // A_ROW_DIVISOR).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + a_rows[:, None] * stride_am + ks[None, :]
    w_tile = (
        w_ptr
        + expert.to(tl.int64) * stride_we
        + cols[None, :].to(tl.int64) * stride_wn
        + ks[:, None]
    )
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC_DTYPE)
    for start in range(0, K, BLOCK_K):
        k_ok = start + ks < K
        a = tl.load(a_tile, mask=valid[:, None] & k_ok[None, :], other=0)
        w = tl.load(w_tile, mask=k_ok[:, None] & (cols[None, :] < N), other=0)
        acc = tl.dot(a, w, acc, input_precision=INPUT_PRECISION, out_dtype=ACC_DTYPE)
        a_tile += BLOCK_K
        w_tile += BLOCK_K
    if SCALED:
        a_scale = tl.load(a_scale_ptr + a_rows, mask=valid, other=0.0)
        w_scale = tl.load(
            w_scale_ptr + expert.to(tl.int64) * stride_wse + cols, mask=cols < N, other=0.0
        )
        result = acc.to(tl.float32) * a_scale[:, None] * w_scale[None, :]
    else:
        result = acc
    if MUL_WEIGHT:
        result *= tl.load(weight_ptr + pairs, mask=valid, other=0.0)[:, None]
    o = out_ptr + pairs[:, None].to(tl.int64) * stride_om + cols[None, :]
    tl.store(o, result.to(out_ptr.dtype.element_ty), mask=valid[:, None] & (cols[None, :] < N))


def block_m(num_pairs: int, num_experts: int) -> int:
    """Rows of a block (pairs of one expert): 16 where each expert has few pairs (decode:
    the step streams the experts' weights), 64 for prefill. Both GEMMs share it (one
    grouping)."""
    return 16 if num_pairs <= 16 * num_experts else 64


# Decode tiles (BLOCK_N, BLOCK_K, warps, stages), measured on an H100 (2026-12-07,
# `benchmarks/gpu_quantized_moe.py --sweep-moe`, the Mixtral-8x7B block at 1 and 32 tokens,
# bf16 and INT8, each GEMM alone over 8 candidates): 32 x 512 with 3 stages was first or
# second in 7 of the 8 rows and within 3 % in the eighth; the tiles before (64 x 128, 4
# stages) were 1-3 % slower in 7 rows, and narrowing the columns to reach more programs (16
# x 128: 512 programs for the down projection at one token) was the slowest of all there.
DECODE_TILES = (32, 512, 4, 3)


def gemm_tiles(
    num_pairs: int, num_experts: int, n: int, k: int, int8: bool = False
) -> tuple[int, int, int, int, int]:
    """``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)`` of one grouped GEMM of ``n``
    outputs over ``k`` (``int8``: INT8 operands). Decode: ``DECODE_TILES`` for both GEMMs
    and both dtypes; prefill: wide tiles. ``n``, ``k`` and ``int8`` let a backend tune them
    per GEMM (``--sweep-moe`` times them that way)."""
    if block_m(num_pairs, num_experts) == 64:
        return 64, 128, 64, 8, 3
    return (16, *DECODE_TILES)


def group_by_expert(
    ids: torch.Tensor, num_experts: int, block_m: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pair_of_slot, block_expert)``: the pairs (``ids`` flattened, ``[T * top_k]``)
    sorted by expert, each expert's run padded to a multiple of ``block_m`` with the
    sentinel ``T * top_k``; and each block's expert (-1 for blocks past the last).
    Sizes are the worst case, so no value is read back to the host."""
    flat = ids.reshape(-1)
    num_pairs = flat.numel()
    slots = num_pairs + num_experts * (block_m - 1)
    slots = triton.cdiv(slots, block_m) * block_m
    counts = torch.zeros(num_experts, dtype=torch.int64, device=ids.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = padded.cumsum(0)
    padded_start = padded_end - padded
    start = counts.cumsum(0) - counts
    sorted_experts, order = torch.sort(flat, stable=True)
    rank = torch.arange(num_pairs, device=ids.device)
    destination = padded_start[sorted_experts] + (rank - start[sorted_experts])
    pair_of_slot = torch.full((slots,), num_pairs, dtype=torch.int64, device=ids.device)
    pair_of_slot.scatter_(0, destination, order)
    block_starts = torch.arange(0, slots, block_m, device=ids.device)
    block_expert = torch.searchsorted(padded_end, block_starts, right=True)
    block_expert = torch.where(block_expert < num_experts, block_expert, -1).to(torch.int32)
    return pair_of_slot, block_expert


def _grouped_gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    out: torch.Tensor,
    grouping: tuple[torch.Tensor, torch.Tensor],
    a_row_divisor: int,
    pair_weights: torch.Tensor | None,
    tiles: tuple[int, int, int, int, int],
    scales: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """``_grouped_gemm_kernel`` over the blocks of ``grouping``; ``scales``: int8 ``a``
    and ``w`` with ``(a_scale [rows] fp32, w_scale [E, N] fp32)``."""
    pair_of_slot, block_expert = grouping
    block_m, block_n, block_k, warps, stages = tiles
    n, k = w.shape[1], w.shape[2]
    grid = (triton.cdiv(n, block_n), block_expert.numel())
    _grouped_gemm_kernel[grid](
        a,
        w,
        out,
        pair_of_slot,
        block_expert,
        pair_weights if pair_weights is not None else out,
        scales[0] if scales is not None else out,
        scales[1] if scales is not None else out,
        out.shape[0],
        n,
        k,
        a.stride(0),
        w.stride(0),
        w.stride(1),
        scales[1].stride(0) if scales is not None else 0,
        out.stride(0),
        A_ROW_DIVISOR=a_row_divisor,
        MUL_WEIGHT=pair_weights is not None,
        SCALED=scales is not None,
        ACC_DTYPE=tl.int32 if scales is not None else tl.float32,
        # fp32 weights: fp32 products (tf32 would round them); else Triton's default
        INPUT_PRECISION="ieee" if a.dtype == torch.float32 else None,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        num_warps=warps,
        num_stages=stages,
    )


def fused_moe(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    """The MoE block's output for ``x`` (see the module docstring)."""
    check_launch_device(_grouped_gemm_kernel, "fused_moe", x, w13, w2)
    _check_experts("fused_moe", x.dtype, w13, w2)
    return _experts(x, router_logits, w13, w2, top_k, renormalize, None)


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
    """:func:`fused_moe` with W8A8 INT8 experts (see the module docstring); the
    reference's semantics (``reference_kernels/fused_moe.py``)."""
    check_launch_device(_grouped_gemm_kernel, "fused_moe_w8a8_int8", x, w13, w2)
    _check_experts("fused_moe_w8a8_int8", torch.int8, w13, w2)
    for name, scale, w in (("w13_scale", w13_scale, w13), ("w2_scale", w2_scale, w2)):
        if scale.dtype != torch.float32 or scale.shape != w.shape[:2] or scale.stride(-1) != 1:
            raise ValueError(
                f"fused_moe_w8a8_int8: {name} must be {list(w.shape[:2])} float32 with "
                f"contiguous rows, got {list(scale.shape)} {scale.dtype}"
            )
    return _experts(x, router_logits, w13, w2, top_k, renormalize, (w13_scale, w2_scale))


def _check_experts(op: str, dtype: torch.dtype, w13: torch.Tensor, w2: torch.Tensor) -> None:
    for name, w in (("w13", w13), ("w2", w2)):
        if w.stride(-1) != 1 or w.dtype != dtype:
            raise ValueError(
                f"{op}: {name} must be {dtype} with contiguous rows, got {w.dtype} strides "
                f"{w.stride()}"
            )


def _experts(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    top_k: int,
    renormalize: bool,
    weight_scales: tuple[torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """Steps 1-6 of the module docstring; ``weight_scales``: int8 experts' scales."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    num_tokens, hidden = x.shape
    num_experts, intermediate = w13.shape[0], w2.shape[2]
    weights, ids = route_topk_softmax(router_logits, top_k, renormalize)
    num_pairs = num_tokens * top_k
    if num_pairs == 0:
        return torch.empty_like(x)
    int8 = weight_scales is not None
    up_tiles = gemm_tiles(num_pairs, num_experts, 2 * intermediate, hidden, int8)
    down_tiles = gemm_tiles(num_pairs, num_experts, hidden, intermediate, int8)
    grouping = group_by_expert(ids, num_experts, block_m(num_pairs, num_experts))
    gate_up = torch.empty((num_pairs, 2 * intermediate), dtype=x.dtype, device=x.device)
    down = torch.empty((num_pairs, hidden), dtype=x.dtype, device=x.device)
    pair_weights = weights.reshape(-1).contiguous()
    if weight_scales is None:
        _grouped_gemm(x, w13, gate_up, grouping, top_k, None, up_tiles)
        _grouped_gemm(silu_and_mul(gate_up), w2, down, grouping, 1, pair_weights, down_tiles)
    else:
        q, x_scale = per_token_quant_int8(x)
        up_scales = (x_scale, weight_scales[0])
        _grouped_gemm(q, w13, gate_up, grouping, top_k, None, up_tiles, up_scales)
        q, pair_scale = per_token_quant_int8(silu_and_mul(gate_up))
        scales = (pair_scale, weight_scales[1])
        _grouped_gemm(q, w2, down, grouping, 1, pair_weights, down_tiles, scales)
    return down.view(num_tokens, top_k, hidden).sum(dim=1)

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

vLLM hook served: the MoE layers' monolithic method (``moe/fused_moe_method.py``)
through ``device.py``'s kernel table. Proven by
``tests/unit/test_triton_kernels_interpret.py`` and ``tests/gpu/test_triton_kernels.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import check_launch_device
from vllm_platform_template.devices.gpu.kernels.activation import silu_and_mul
from vllm_platform_template.reference_kernels.fused_moe import route_topk_softmax

__all__ = ["fused_moe", "group_by_expert"]


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    w_ptr,
    out_ptr,
    pair_ptr,
    block_expert_ptr,
    weight_ptr,
    num_pairs,
    N,
    K,
    stride_am,
    stride_we,
    stride_wn,
    stride_om,
    A_ROW_DIVISOR: tl.constexpr,
    MUL_WEIGHT: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """``out[pair] = a[pair // A_ROW_DIVISOR] @ w[e]^T`` (times the pair's routing weight
    when ``MUL_WEIGHT``) for the pairs of block ``program_id(1)``, all of expert ``e``."""
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
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        k_ok = start + ks < K
        a = tl.load(a_tile, mask=valid[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_tile, mask=k_ok[:, None] & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc, input_precision=INPUT_PRECISION)
        a_tile += BLOCK_K
        w_tile += BLOCK_K
    if MUL_WEIGHT:
        acc *= tl.load(weight_ptr + pairs, mask=valid, other=0.0)[:, None]
    o = out_ptr + pairs[:, None].to(tl.int64) * stride_om + cols[None, :]
    tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=valid[:, None] & (cols[None, :] < N))


def gemm_tiles(num_pairs: int, num_experts: int) -> tuple[int, int, int, int, int]:
    """``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)``: narrow row blocks where each
    expert has few pairs (decode: the step streams the experts' weights), wide ones for
    prefill."""
    if num_pairs <= 16 * num_experts:
        return 16, 64, 128, 4, 4
    return 64, 128, 64, 8, 3


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
) -> None:
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
        out.shape[0],
        n,
        k,
        a.stride(0),
        w.stride(0),
        w.stride(1),
        out.stride(0),
        A_ROW_DIVISOR=a_row_divisor,
        MUL_WEIGHT=pair_weights is not None,
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
    for name, w in (("w13", w13), ("w2", w2)):
        if w.stride(-1) != 1 or w.dtype != x.dtype:
            raise ValueError(
                f"fused_moe: {name} must be {x.dtype} with contiguous rows, got {w.dtype} "
                f"strides {w.stride()}"
            )
    if x.stride(-1) != 1:
        x = x.contiguous()
    num_tokens, hidden = x.shape
    num_experts, intermediate = w13.shape[0], w2.shape[2]
    weights, ids = route_topk_softmax(router_logits, top_k, renormalize)
    num_pairs = num_tokens * top_k
    if num_pairs == 0:
        return torch.empty_like(x)
    tiles = gemm_tiles(num_pairs, num_experts)
    grouping = group_by_expert(ids, num_experts, tiles[0])
    gate_up = torch.empty((num_pairs, 2 * intermediate), dtype=x.dtype, device=x.device)
    _grouped_gemm(x, w13, gate_up, grouping, top_k, None, tiles)
    activated = silu_and_mul(gate_up)
    down = torch.empty((num_pairs, hidden), dtype=x.dtype, device=x.device)
    pair_weights = weights.reshape(-1).contiguous()
    _grouped_gemm(activated, w2, down, grouping, 1, pair_weights, tiles)
    return down.view(num_tokens, top_k, hidden).sum(dim=1)

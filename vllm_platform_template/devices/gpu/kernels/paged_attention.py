"""Paged attention over the plugin's KV cache, and the cache write.

Cache layout: each layer owns ``kv_cache[num_blocks, num_kv_heads, block_size,
2 * head_size]``, split as::

    kv = kv_cache.view(num_blocks, num_kv_heads, 2 * block_size, head_size)
    key_cache, value_cache = kv.chunk(2, dim=2)   # each [B, Hkv, N, D], strided views

with token ``t`` of a block at row ``t`` ("plain" layout). A token's slot is
``block_id * block_size + offset``.

- :func:`reshape_and_cache_` writes ``key``/``value`` ``[T, Hkv, D]`` at
  ``slot_mapping[:T]``; slots outside the cache (-1 for padding) are skipped.
- :func:`paged_attention` computes causal attention for a mixed batch of
  prefills and decodes. Request ``r`` owns queries ``query_start_loc[r] :
  query_start_loc[r + 1]``; its query ``i`` sits at position ``p = seq_lens[r] -
  q_len + i`` and attends keys ``0..p`` (read through ``block_table[r]``). Query
  head ``h`` uses KV head ``h // (Hq // Hkv)``. Softmax is online (flash-attention
  style), accumulated in float32; key positions past the causal bound or
  ``seq_len`` are never loaded, so stale data (even NaN) in unused cache slots
  cannot leak into the output.

Two kernels do the attention. The general one packs ``BLOCK_Q`` query tokens x
all ``Hq // Hkv`` heads of one KV head into a ``BLOCK_M``-row tile (so each K/V
tile is loaded once for the whole head group) and walks the keys in
``TILE_N`` steps, gathering each key's block from the block table; its flat grid
maps programs to requests by a binary search over ``query_start_loc``. When every
request decodes one token (``max_query_len == 1``) a split-KV kernel runs
instead: each (request, KV head) is split into ``num_splits`` key ranges run in
parallel, and a small kernel merges the partial softmax results.

What is launched depends on the batch shape only - requests, tokens and the
query-length class (``max_query_len == 1`` means all-decode; longer ones pick the
general kernel's tile) - never on the sequence lengths, which the kernels read
from ``seq_lens``/``query_start_loc`` on the device. A graph captured for a shape
therefore replays exactly what an eager step of that shape launches, for any
lengths. :class:`TritonAttentionPlanner` decides each shape's
:class:`AttentionPlan` once (kernel, grid, constants, split count, scratch views)
and :func:`write_kv_unchecked` / :func:`attend_unchecked` launch it through
``launch.Launch`` (no per-call argument binding by Triton); the public
:func:`reshape_and_cache_` and :func:`paged_attention` check their arguments
against the contract of every path (``reference_kernels/paged_attention/contract.py``) first.

vLLM hook served: the attention kernels of ``TEMPLATE_ATTN``
(``Platform.get_attn_backend_cls``), through ``attention_kernels.py``. Proven by
``tests/unit/test_triton_kernels_interpret.py`` and, on the device,
``tests/gpu/test_triton_kernels.py``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.identity import torch_module
from vllm_platform_template.devices.gpu.kernels import (
    check_last_dim_contiguous,
    check_launch_device,
    is_interpreted,
    next_power_of_2,
)
from vllm_platform_template.devices.gpu.kernels.launch import Launch
from vllm_platform_template.reference_kernels.paged_attention.contract import (
    AttentionLayout,
    check_attention,
    check_kv_write,
)

__all__ = [
    "AttentionLaunchConfig",
    "AttentionPlan",
    "TritonAttentionPlanner",
    "attend_unchecked",
    "decode_num_splits",
    "paged_attention",
    "prefill_launch_config",
    "reshape_and_cache_",
    "write_kv_unchecked",
]

LOG2E = 1.4426950408889634

DECODE_MIN_KEYS_PER_SPLIT = 256
"""A decode split covers at least this many keys (for short contexts the trailing
splits find nothing to do)."""

DECODE_MAX_SPLITS = 64

DECODE_PROGRAMS_PER_SM = 2
"""Decode programs (request x KV head x split) aimed at per multiprocessor."""

DECODE_TILE_N = 64
"""Keys per step of the decode kernel (32 for head sizes above 128)."""

DECODE_NUM_WARPS = 4
DECODE_NUM_STAGES = 2


# --------------------------------------------------------------------------
# KV-cache write
# --------------------------------------------------------------------------


@triton.jit(do_not_specialize=["num_slots"])
def _reshape_and_cache_kernel(
    k_ptr,
    v_ptr,
    kc_ptr,
    vc_ptr,
    slot_ptr,
    k_tok_stride,
    k_head_stride,
    v_tok_stride,
    v_head_stride,
    kc_block_stride,
    kc_head_stride,
    kc_tok_stride,
    vc_block_stride,
    vc_head_stride,
    vc_tok_stride,
    block_size,
    num_slots,
    num_kv_heads,
    head_size,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    # The token's slot, broadcast per head (keeps every mask a block).
    slot = tl.load(slot_ptr + tok + 0 * heads).to(tl.int64)
    head_ok = (heads < num_kv_heads) & (slot >= 0) & (slot < num_slots)
    slot = tl.where(head_ok, slot, 0)
    blk = slot // block_size
    off = slot % block_size
    heads = heads.to(tl.int64)
    mask = head_ok[:, None] & (d < head_size)[None, :]
    k = tl.load(
        k_ptr + (tok * k_tok_stride + heads * k_head_stride)[:, None] + d[None, :], mask=mask
    )
    v = tl.load(
        v_ptr + (tok * v_tok_stride + heads * v_head_stride)[:, None] + d[None, :], mask=mask
    )
    kc = kc_ptr + (blk * kc_block_stride + heads * kc_head_stride + off * kc_tok_stride)[:, None]
    vc = vc_ptr + (blk * vc_block_stride + heads * vc_head_stride + off * vc_tok_stride)[:, None]
    tl.store(kc + d[None, :], k.to(kc_ptr.dtype.element_ty), mask=mask)
    tl.store(vc + d[None, :], v.to(vc_ptr.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------
# Attention kernels
# --------------------------------------------------------------------------


@triton.jit
def _dot(a, b, IEEE_DOT: tl.constexpr):
    """``a @ b`` in float32; full-precision products for float32 inputs (no TF32)."""
    if IEEE_DOT:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _attend_tile(
    q,
    m_i,
    l_i,
    acc,
    kpos,
    k_in,
    visible,
    bt_row,
    bt_cols,
    num_blocks,
    k_head,
    kc_block_stride,
    kc_tok_stride,
    v_head,
    vc_block_stride,
    vc_tok_stride,
    block_size,
    d,
    d_ok,
    qk_scale,
    IEEE_DOT: tl.constexpr,
    MASKED: tl.constexpr,
):
    """One online-softmax step over keys ``kpos``.

    ``k_in``: keys to load (inside the sequence); the others' block-table entry,
    K and V are not read (``other=0``), and neither are entries past the table
    row or block ids outside the cache. ``visible``: [rows, keys] attention
    mask, applied when ``MASKED`` (tiles that every row sees whole skip it).
    Logits are in log2 units (``qk_scale`` includes log2(e)).
    """
    bt_col = kpos // block_size
    k_in = k_in & (bt_col < bt_cols)
    blk = tl.load(bt_row + bt_col, mask=k_in, other=0).to(tl.int64)
    k_in = k_in & (blk >= 0) & (blk < num_blocks)
    row = kpos % block_size
    k_off = blk * kc_block_stride + row * kc_tok_stride
    k_t = tl.load(
        k_head + k_off[None, :] + d[:, None], mask=k_in[None, :] & d_ok[:, None], other=0.0
    )
    s = _dot(q, k_t, IEEE_DOT) * qk_scale
    if MASKED:
        s = tl.where(visible & k_in[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    # Rows with nothing visible yet keep m = -inf; shift them by 0 to avoid inf - inf.
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v_off = blk * vc_block_stride + row * vc_tok_stride
    v = tl.load(v_head + v_off[:, None] + d[None, :], mask=k_in[:, None] & d_ok[None, :], other=0.0)
    acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, IEEE_DOT)
    return m_new, l_i, acc


@triton.jit
def _find_request(qsl_ptr, q_block, num_reqs, BLOCK_Q: tl.constexpr):
    """Request owning flat query block ``q_block``: the last ``r`` with
    ``query_start_loc[r] // BLOCK_Q + r <= q_block`` (request ``r``'s blocks start there)."""
    lo: tl.int32 = 0
    hi: tl.int32 = num_reqs
    while lo < hi:
        mid = (lo + hi) // 2
        if tl.load(qsl_ptr + mid) // BLOCK_Q + mid <= q_block:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@triton.jit(do_not_specialize=["bt_stride", "bt_cols", "num_blocks", "num_reqs"])
def _paged_attention_kernel(
    q_ptr,
    kc_ptr,
    vc_ptr,
    out_ptr,
    bt_ptr,
    seq_lens_ptr,
    qsl_ptr,
    q_tok_stride,
    q_head_stride,
    kc_block_stride,
    kc_head_stride,
    kc_tok_stride,
    vc_block_stride,
    vc_head_stride,
    vc_tok_stride,
    out_tok_stride,
    out_head_stride,
    bt_stride,
    bt_cols,
    num_blocks,
    num_reqs,
    block_size,
    head_size,
    qk_scale,
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    TILE_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    IEEE_DOT: tl.constexpr,
):
    q_block = tl.program_id(0)
    kv_head = tl.program_id(1)
    req = _find_request(qsl_ptr, q_block, num_reqs, BLOCK_Q)
    q_start = tl.load(qsl_ptr + req)
    q_len = tl.load(qsl_ptr + req + 1) - q_start
    q_block_local = q_block - (q_start // BLOCK_Q + req)
    if q_block_local * BLOCK_Q >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + req)

    # Row m of the tile: query token m // GROUP of this block, head m % GROUP of the group.
    m = tl.arange(0, BLOCK_M)
    q_local = q_block_local * BLOCK_Q + m // GROUP
    row_ok = (m < BLOCK_Q * GROUP) & (q_local < q_len)
    heads = (kv_head * GROUP + m % GROUP).to(tl.int64)
    q_pos = seq_len - q_len + q_local  # absolute position of each row's query
    d = tl.arange(0, BLOCK_D)
    d_ok = d < head_size
    q_tok = (q_start + q_local).to(tl.int64)
    q_rows = q_ptr + (q_tok * q_tok_stride + heads * q_head_stride)[:, None]
    q = tl.load(q_rows + d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)

    # Keys up to the last query of this block (causal).
    last_q = tl.minimum((q_block_local + 1) * BLOCK_Q, q_len) - 1
    num_keys = seq_len - q_len + last_q + 1
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    bt_row = bt_ptr + req.to(tl.int64) * bt_stride
    k_head = kc_ptr + kv_head.to(tl.int64) * kc_head_stride
    v_head = vc_ptr + kv_head.to(tl.int64) * vc_head_stride
    # Keys up to the block's first query position are visible to every row: those
    # whole tiles skip the causal mask; the rest (the diagonal) apply it.
    q_pos_first = seq_len - q_len + q_block_local * BLOCK_Q
    full_end = tl.maximum(q_pos_first + 1, 0) // TILE_N * TILE_N
    for start in range(0, full_end, TILE_N):
        kpos = start + tl.arange(0, TILE_N)
        k_in = kpos < num_keys
        m_i, l_i, acc = _attend_tile(
            q,
            m_i,
            l_i,
            acc,
            kpos,
            k_in,
            k_in[None, :],
            bt_row,
            bt_cols,
            num_blocks,
            k_head,
            kc_block_stride,
            kc_tok_stride,
            v_head,
            vc_block_stride,
            vc_tok_stride,
            block_size,
            d,
            d_ok,
            qk_scale,
            IEEE_DOT,
            False,
        )
    for start in range(full_end, num_keys, TILE_N):
        kpos = start + tl.arange(0, TILE_N)
        visible = (kpos[None, :] <= q_pos[:, None]) & row_ok[:, None]
        m_i, l_i, acc = _attend_tile(
            q,
            m_i,
            l_i,
            acc,
            kpos,
            kpos < num_keys,
            visible,
            bt_row,
            bt_cols,
            num_blocks,
            k_head,
            kc_block_stride,
            kc_tok_stride,
            v_head,
            vc_block_stride,
            vc_tok_stride,
            block_size,
            d,
            d_ok,
            qk_scale,
            IEEE_DOT,
            True,
        )
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    out_rows = out_ptr + (q_tok * out_tok_stride + heads * out_head_stride)[:, None]
    tl.store(
        out_rows + d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & d_ok[None, :],
    )


@triton.jit(do_not_specialize=["bt_stride", "bt_cols", "num_blocks", "num_splits"])
def _paged_decode_kernel(
    q_ptr,
    kc_ptr,
    vc_ptr,
    out_ptr,
    part_acc_ptr,
    part_m_ptr,
    part_l_ptr,
    bt_ptr,
    seq_lens_ptr,
    qsl_ptr,
    q_tok_stride,
    q_head_stride,
    kc_block_stride,
    kc_head_stride,
    kc_tok_stride,
    vc_block_stride,
    vc_head_stride,
    vc_tok_stride,
    out_tok_stride,
    out_head_stride,
    bt_stride,
    bt_cols,
    num_blocks,
    num_q_heads,
    num_splits,
    block_size,
    head_size,
    qk_scale,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    TILE_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    IEEE_DOT: tl.constexpr,
    DIRECT: tl.constexpr,
    MIN_KEYS: tl.constexpr,
):
    """Program (request, KV head, split): one decode token, all heads of the group,
    keys of one TILE_N-aligned share of ``[0, seq_len)`` of at least ``MIN_KEYS``
    keys (splits past the sequence have nothing to do)."""
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    q_start = tl.load(qsl_ptr + req)
    if tl.load(qsl_ptr + req + 1) - q_start <= 0:
        return  # request without a query token this step
    seq_len = tl.load(seq_lens_ptr + req)
    per_split = tl.maximum(tl.cdiv(tl.cdiv(seq_len, num_splits), TILE_N) * TILE_N, MIN_KEYS)
    k_start = split * per_split
    k_end = tl.minimum(k_start + per_split, seq_len)

    g = tl.arange(0, BLOCK_G)
    g_ok = g < GROUP
    heads = (kv_head * GROUP + g).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < head_size
    q_tok = q_start.to(tl.int64)
    q_rows = q_ptr + (q_tok * q_tok_stride + heads * q_head_stride)[:, None]
    q = tl.load(q_rows + d[None, :], mask=g_ok[:, None] & d_ok[None, :], other=0.0)

    m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    bt_row = bt_ptr + req.to(tl.int64) * bt_stride
    k_head = kc_ptr + kv_head.to(tl.int64) * kc_head_stride
    v_head = vc_ptr + kv_head.to(tl.int64) * vc_head_stride
    # Whole tiles need no mask (the query at seq_len - 1 sees every key); the tail does.
    full_end = k_start + tl.maximum(k_end - k_start, 0) // TILE_N * TILE_N
    for start in range(k_start, full_end, TILE_N):
        kpos = start + tl.arange(0, TILE_N)
        k_in = kpos < k_end
        m_i, l_i, acc = _attend_tile(
            q,
            m_i,
            l_i,
            acc,
            kpos,
            k_in,
            k_in[None, :],
            bt_row,
            bt_cols,
            num_blocks,
            k_head,
            kc_block_stride,
            kc_tok_stride,
            v_head,
            vc_block_stride,
            vc_tok_stride,
            block_size,
            d,
            d_ok,
            qk_scale,
            IEEE_DOT,
            False,
        )
    for start in range(full_end, k_end, TILE_N):
        kpos = start + tl.arange(0, TILE_N)
        k_in = kpos < k_end
        m_i, l_i, acc = _attend_tile(
            q,
            m_i,
            l_i,
            acc,
            kpos,
            k_in,
            g_ok[:, None] & k_in[None, :],
            bt_row,
            bt_cols,
            num_blocks,
            k_head,
            kc_block_stride,
            kc_tok_stride,
            v_head,
            vc_block_stride,
            vc_tok_stride,
            block_size,
            d,
            d_ok,
            qk_scale,
            IEEE_DOT,
            True,
        )
    if DIRECT:
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        out_rows = out_ptr + (q_tok * out_tok_stride + heads * out_head_stride)[:, None]
        tl.store(
            out_rows + d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=g_ok[:, None] & d_ok[None, :],
        )
    else:
        # Partial results [req, head, split]: unnormalised acc, running max, sum.
        part = (req.to(tl.int64) * num_q_heads + heads) * num_splits + split
        tl.store(part_m_ptr + part, m_i, mask=g_ok)
        tl.store(part_l_ptr + part, l_i, mask=g_ok)
        acc_ptrs = part_acc_ptr + (part * head_size)[:, None] + d[None, :]
        tl.store(acc_ptrs, acc, mask=g_ok[:, None] & d_ok[None, :])


@triton.jit(do_not_specialize=["num_splits"])
def _paged_decode_combine_kernel(
    part_acc_ptr,
    part_m_ptr,
    part_l_ptr,
    out_ptr,
    qsl_ptr,
    out_tok_stride,
    out_head_stride,
    num_q_heads,
    num_splits,
    head_size,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """Program (request, query head): merge the splits' partial softmax results."""
    req = tl.program_id(0)
    head = tl.program_id(1)
    q_start = tl.load(qsl_ptr + req)
    if tl.load(qsl_ptr + req + 1) - q_start <= 0:
        return
    s = tl.arange(0, BLOCK_S)
    s_ok = s < num_splits
    d = tl.arange(0, BLOCK_D)
    d_ok = d < head_size
    part = (req.to(tl.int64) * num_q_heads + head) * num_splits + s
    m = tl.load(part_m_ptr + part, mask=s_ok, other=float("-inf"))
    l_s = tl.load(part_l_ptr + part, mask=s_ok, other=0.0)
    m_max = tl.max(m, axis=0)
    w = tl.exp2(m - tl.where(m_max == float("-inf"), 0.0, m_max))  # empty splits weigh 0
    total = tl.sum(w * l_s, axis=0)
    acc_ptrs = part_acc_ptr + (part * head_size)[:, None] + d[None, :]
    acc = tl.load(acc_ptrs, mask=s_ok[:, None] & d_ok[None, :], other=0.0)
    out = tl.sum(acc * w[:, None], axis=0) / tl.where(total == 0.0, 1.0, total)
    out_row = out_ptr + q_start.to(tl.int64) * out_tok_stride + head * out_head_stride
    tl.store(out_row + d, out.to(out_ptr.dtype.element_ty), mask=d_ok)


# --------------------------------------------------------------------------
# Launch heuristics
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionLaunchConfig:
    """Tile of the general attention kernel."""

    block_m: int  # rows: query tokens x heads of one KV head's group
    tile_n: int  # keys per step
    num_warps: int
    num_stages: int


def prefill_launch_config(
    max_query_len: int, group: int, head_size: int, element_size: int = 2
) -> AttentionLaunchConfig:
    """Tile of the general kernel: rows = query tokens x heads of a KV head's group.

    Short queries (decode-like rows in a mixed batch) get 16-row tiles; long
    prefills get 128-row tiles with 64 keys a step (64 rows, 32 keys for
    head sizes above 128 or 4-byte elements, to stay within registers and
    shared memory). Four warps, two stages: on an H100 (bf16, 32/8 heads of
    128) that reached about 220 TFLOP/s for a 4096-token prefill, within 2% of
    the best of a sweep over rows 64/128, keys 32/64/128, warps 4/8 and stages
    1-4. fp32 at 128 rows x 128 dims spilled registers into local memory so
    large that the launch failed with "CUDA out of memory" on an H100 shared
    by 16 test processes.
    """
    rows = max(1, max_query_len) * group
    block_m = 16 if rows <= 16 else 32 if rows <= 32 else 64 if rows <= 64 else 128
    block_d = max(16, next_power_of_2(head_size))
    if block_d > 128 or (element_size > 2 and block_d >= 128):
        block_m = min(block_m, 64)
    block_m = max(block_m, next_power_of_2(group))
    tile_n = 64 if block_m >= 64 and block_d <= 128 and element_size <= 2 else 32
    return AttentionLaunchConfig(block_m, tile_n, num_warps=4, num_stages=2)


@functools.lru_cache(maxsize=16)
def _multiprocessor_count(device_index: int) -> int:
    return torch_module().get_device_properties(device_index).multi_processor_count


def num_multiprocessors(device: torch.device) -> int:
    """The device's multiprocessors (4 under Triton's interpreter: a few splits, so that
    tests exercise the merge)."""
    if is_interpreted(_paged_decode_kernel):
        return 4
    index = device.index if device.index is not None else torch_module().current_device()
    return _multiprocessor_count(index)


def decode_num_splits(num_reqs: int, num_kv_heads: int, num_multiprocessors: int) -> int:
    """Key splits per (request, KV head) of the decode kernel.

    Aims at :data:`DECODE_PROGRAMS_PER_SM` programs per multiprocessor, at most
    :data:`DECODE_MAX_SPLITS`. It depends on the batch shape only, never on the
    sequence lengths: a graph captured for a shape launches what an eager step of
    that shape launches (the same bits), whatever lengths it is replayed with. Each
    split covers at least :data:`DECODE_MIN_KEYS_PER_SPLIT` keys in the kernel, so
    for short contexts the trailing splits find nothing to do.
    """
    programs = max(1, num_reqs * num_kv_heads)
    wanted = triton.cdiv(DECODE_PROGRAMS_PER_SM * num_multiprocessors, programs)
    return max(1, min(wanted, DECODE_MAX_SPLITS))


# --------------------------------------------------------------------------
# Plans: how one batch shape is launched, decided once
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionPlan:
    """How one batch shape (requests, tokens, query-length class) is launched.

    Made once per shape by :class:`TritonAttentionPlanner` and shared by every
    layer of every step of that shape: the kernel, grid and constants, the decode
    split count and the split scratch (views of the planner's one buffer).
    """

    num_reqs: int
    num_tokens: int
    decode: bool
    num_splits: int
    attention: Launch | None
    """None: nothing to attend for (no tokens or requests)."""
    combine: Launch | None = None
    part_acc: torch.Tensor | None = None
    part_m: torch.Tensor | None = None
    part_l: torch.Tensor | None = None


@functools.lru_cache(maxsize=256)
def _kv_write_launch(
    num_tokens: int, num_kv_heads: int, head_size: int, dtype: torch.dtype
) -> Launch:
    """The KV write of one shape and dtype (a Launch serves one dtype per argument)."""
    block_d = next_power_of_2(head_size)
    block_h = min(next_power_of_2(num_kv_heads), max(1, 4096 // block_d))
    return Launch(
        _reshape_and_cache_kernel,
        (num_tokens, triton.cdiv(num_kv_heads, block_h), 1),
        {"BLOCK_H": block_h, "BLOCK_D": block_d},
        num_warps=4 if block_h * block_d <= 2048 else 8,
        num_stages=3,
    )


def write_kv_unchecked(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """:func:`reshape_and_cache_` without its checks (the caller checked the layer once)."""
    num_tokens = slot_mapping.shape[0]
    num_kv_heads, head_size = key.shape[1], key.shape[2]
    if num_tokens == 0:
        return
    launch = _kv_write_launch(num_tokens, num_kv_heads, head_size, key.dtype)
    ks, vs, kcs, vcs = key.stride(), value.stride(), key_cache.stride(), value_cache.stride()
    launch(
        (key, value, key_cache, value_cache, slot_mapping),
        (
            ks[0],
            ks[1],
            vs[0],
            vs[1],
            kcs[0],
            kcs[1],
            kcs[2],
            vcs[0],
            vcs[1],
            vcs[2],
            key_cache.shape[2],
            key_cache.shape[0] * key_cache.shape[2],
            num_kv_heads,
            head_size,
        ),
    )


class TritonAttentionPlanner:
    """Launch plans of one KV-cache group, made once per batch shape.

    Everything a step's shape fixes is decided when the shape is first seen and
    cached: the kernel (split-KV decode when every request decodes one token, the
    general kernel otherwise), its grid, tile and constants, the split count
    (:func:`decode_num_splits`: requests, KV heads, multiprocessors) and the split
    scratch, views of one buffer allocated here for the largest split decode of up
    to ``max_num_reqs`` requests. :meth:`plan` allocates nothing, copies nothing
    to the host and reads no tensor, so it may run while a graph is captured.
    :meth:`warm_up` compiles every variant a step can launch, once per process and
    layout (the engine's planners do, so no Triton compile happens while serving;
    the public :func:`paged_attention` does not, as it plans each call anew).
    """

    def __init__(
        self,
        layout: AttentionLayout,
        max_num_reqs: int,
        device: torch.device,
        *,
        decode_splits: int | None = None,
    ) -> None:
        if layout.num_kv_heads <= 0 or layout.num_heads % layout.num_kv_heads != 0:
            raise ValueError(
                f"query heads ({layout.num_heads}) must be a multiple of KV heads "
                f"({layout.num_kv_heads})"
            )
        self.layout = layout
        self.device = torch.device(device)
        self.max_num_reqs = max(1, max_num_reqs)
        self.group = layout.num_heads // layout.num_kv_heads
        self.block_d = max(16, next_power_of_2(layout.head_size))
        self.element_size = torch.empty((), dtype=layout.dtype).element_size()
        self.ieee = layout.dtype == torch.float32
        self.num_multiprocessors = num_multiprocessors(self.device)
        self.forced_splits = None if decode_splits is None else max(1, int(decode_splits))
        self.decode_tile_n = DECODE_TILE_N if self.block_d <= 128 else min(DECODE_TILE_N, 32)
        # A forced split count (tests, tuning) splits even short contexts.
        self.min_keys_per_split = (
            self.decode_tile_n if self.forced_splits is not None else DECODE_MIN_KEYS_PER_SPLIT
        )
        rows = max(r * self.num_splits(r) for r in range(1, self.max_num_reqs + 1))
        per_row = layout.num_heads * (layout.head_size + 2)
        self.scratch = torch.empty(rows * per_row, dtype=torch.float32, device=self.device)
        self._plans: dict[tuple[int, int, int], AttentionPlan] = {}

    def warm_up(self) -> None:
        """Compile every kernel variant a step of this layout can launch (once per process
        and layout; nothing to compile under Triton's interpreter)."""
        if not is_interpreted(_paged_decode_kernel):
            _warm_up(self)

    def num_splits(self, num_reqs: int) -> int:
        if self.forced_splits is not None:
            return self.forced_splits
        return decode_num_splits(num_reqs, self.layout.num_kv_heads, self.num_multiprocessors)

    def plan(
        self,
        *,
        num_reqs: int,
        num_tokens: int,
        max_query_len: int,
        seq_lens: torch.Tensor | None = None,
        query_start_loc: torch.Tensor | None = None,
    ) -> AttentionPlan:
        """The plan of this batch shape (``seq_lens``/``query_start_loc`` are not read)."""
        if max_query_len <= 1:
            block_m = max_query_len  # 1: the decode kernel; 0 or less: nothing to attend
        else:
            block_m = self._prefill_config(max_query_len).block_m
        key = (num_reqs, num_tokens, block_m)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= 1024:  # eager prefills of many lengths: stay bounded
                self._plans.clear()
            plan = self._plans[key] = self._make_plan(num_reqs, num_tokens, max_query_len)
        return plan

    def _prefill_config(self, max_query_len: int) -> AttentionLaunchConfig:
        return prefill_launch_config(
            max_query_len, self.group, self.layout.head_size, self.element_size
        )

    def _make_plan(self, num_reqs: int, num_tokens: int, max_query_len: int) -> AttentionPlan:
        if num_reqs > self.max_num_reqs:
            raise ValueError(
                f"this attention planner serves at most {self.max_num_reqs} requests a step, "
                f"got {num_reqs}"
            )
        hq, hkv, d = self.layout.num_heads, self.layout.num_kv_heads, self.layout.head_size
        if num_tokens == 0 or num_reqs == 0 or max_query_len <= 0:
            return AttentionPlan(num_reqs, num_tokens, False, 0, None)
        if max_query_len == 1:
            splits = self.num_splits(num_reqs)
            direct = splits == 1
            decode = Launch(
                _paged_decode_kernel,
                (num_reqs, hkv, splits),
                {
                    "GROUP": self.group,
                    "BLOCK_G": max(16, next_power_of_2(self.group)),
                    "TILE_N": self.decode_tile_n,
                    "BLOCK_D": self.block_d,
                    "IEEE_DOT": self.ieee,
                    "DIRECT": direct,
                    "MIN_KEYS": self.min_keys_per_split,
                },
                num_warps=DECODE_NUM_WARPS,
                num_stages=DECODE_NUM_STAGES,
            )
            if direct:
                return AttentionPlan(num_reqs, num_tokens, True, 1, decode)
            n = num_reqs * hq * splits
            part_acc = self.scratch[: n * d].view(num_reqs, hq, splits, d)
            part_m = self.scratch[n * d : n * (d + 1)].view(num_reqs, hq, splits)
            part_l = self.scratch[n * (d + 1) : n * (d + 2)].view(num_reqs, hq, splits)
            combine = Launch(
                _paged_decode_combine_kernel,
                (num_reqs, hq, 1),
                {"BLOCK_S": next_power_of_2(splits), "BLOCK_D": next_power_of_2(d)},
                num_warps=4,
                num_stages=3,
            )
            return AttentionPlan(
                num_reqs, num_tokens, True, splits, decode, combine, part_acc, part_m, part_l
            )
        cfg = self._prefill_config(max_query_len)
        block_q = cfg.block_m // self.group
        general = Launch(
            _paged_attention_kernel,
            (num_tokens // block_q + num_reqs, hkv, 1),
            {
                "GROUP": self.group,
                "BLOCK_M": cfg.block_m,
                "BLOCK_Q": block_q,
                "TILE_N": cfg.tile_n,
                "BLOCK_D": self.block_d,
                "IEEE_DOT": self.ieee,
            },
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )
        return AttentionPlan(num_reqs, num_tokens, False, 0, general)


def attend_unchecked(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    plan: AttentionPlan,
) -> None:
    """:func:`paged_attention` without its checks, launched as ``plan`` says.

    Launches exactly what ``plan`` fixed; the lengths are read on the device, so
    this is what a graph captures and replays for any lengths of the same shape.
    """
    if plan.attention is None:
        return
    qs, os_, kcs, vcs = query.stride(), output.stride(), key_cache.stride(), value_cache.stride()
    qk_scale = float(scale) * LOG2E
    layout = (
        qs[0],
        qs[1],
        kcs[0],
        kcs[1],
        kcs[2],
        vcs[0],
        vcs[1],
        vcs[2],
        os_[0],
        os_[1],
        block_table.stride(0),
        block_table.shape[1],
        key_cache.shape[0],
    )
    if plan.decode:
        if plan.combine is None:
            parts: tuple[torch.Tensor, ...] = (output, output, output)  # unused (direct)
        else:
            assert plan.part_acc is not None and plan.part_m is not None
            assert plan.part_l is not None
            parts = (plan.part_acc, plan.part_m, plan.part_l)
        plan.attention(
            (query, key_cache, value_cache, output, *parts, block_table, seq_lens, query_start_loc),
            (
                *layout,
                query.shape[1],
                plan.num_splits,
                key_cache.shape[2],
                query.shape[2],
                qk_scale,
            ),
        )
        if plan.combine is not None:
            plan.combine(
                (*parts, output, query_start_loc),
                (os_[0], os_[1], query.shape[1], plan.num_splits, query.shape[2]),
            )
        return
    plan.attention(
        (query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc),
        (*layout, plan.num_reqs, key_cache.shape[2], query.shape[2], qk_scale),
    )


def _warm_up(planner: TritonAttentionPlanner) -> None:
    """Compile every kernel variant a step of ``planner``'s layout can launch, once.

    Variants: the KV write; the decode kernel direct and split, with a merge per
    distinct power-of-two split bound; the general kernel at each tile its
    query lengths can pick. Tiny dummy tensors of the layout's dtype and strides
    class compile what the real steps will find in Triton's cache.
    """
    layout = planner.layout
    key = (layout, planner.device, planner.max_num_reqs, planner.forced_splits)
    if key in _WARMED:
        return
    hq, hkv, d, bs = layout.num_heads, layout.num_kv_heads, layout.head_size, layout.block_size
    dev, dtype = planner.device, layout.dtype
    kv_cache = torch.zeros((2, hkv, bs, 2 * d), dtype=dtype, device=dev)
    key_cache, value_cache = kv_cache.view(2, hkv, 2 * bs, d).chunk(2, dim=2)
    decode_reqs: dict[tuple[bool, int], int] = {}
    for r in range(1, planner.max_num_reqs + 1):
        splits = planner.num_splits(r)
        decode_reqs.setdefault((splits == 1, next_power_of_2(splits)), r)
    shapes = [(r, r, 1) for r in decode_reqs.values()]
    block_ms: dict[int, int] = {}
    for q_len in range(2, 129):
        block_ms.setdefault(planner._prefill_config(q_len).block_m, q_len)
    shapes += [(1, q_len, q_len) for q_len in block_ms.values()]
    for num_reqs, num_tokens, max_query_len in shapes:
        tokens = torch.zeros((num_tokens, hq + 2 * hkv, d), dtype=dtype, device=dev)
        query, k, v = tokens.split([hq, hkv, hkv], dim=1)
        q_lens = [num_tokens // num_reqs] * num_reqs
        qsl = torch.tensor([0, *itertools.accumulate(q_lens)], dtype=torch.int32, device=dev)
        seq_lens = torch.tensor(q_lens, dtype=torch.int32, device=dev)
        block_table = torch.zeros((num_reqs, 1), dtype=torch.int32, device=dev)
        slots = torch.full((num_tokens,), -1, dtype=torch.int64, device=dev)
        write_kv_unchecked(k, v, key_cache, value_cache, slots)
        plan = planner.plan(num_reqs=num_reqs, num_tokens=num_tokens, max_query_len=max_query_len)
        output = torch.empty_like(query)
        attend_unchecked(
            query, key_cache, value_cache, output, block_table, seq_lens, qsl, 1.0, plan
        )
    _WARMED.add(key)


_WARMED: set[tuple[object, ...]] = set()


# --------------------------------------------------------------------------
# Public, checked API
# --------------------------------------------------------------------------


def reshape_and_cache_(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write ``key``/``value`` ``[T, Hkv, D]`` into the paged caches at ``slot_mapping``.

    Caches: ``[num_blocks, Hkv, block_size, D]`` (strided views are fine), same
    dtype as ``key``. ``slot_mapping``: the KV-write contract of every path
    (``contract.check_slot_mapping``: contiguous int64, one slot per token
    written, ``<= T``); slots outside ``[0, num_blocks * block_size)`` (-1 for
    padding) are skipped.
    """
    op = "reshape_and_cache_"
    check_kv_write(op, key, value, key_cache, value_cache, slot_mapping)
    if key.dtype != key_cache.dtype or value_cache.dtype != key_cache.dtype:
        raise ValueError(
            f"{op}: key ({key.dtype}) and the caches ({key_cache.dtype}, {value_cache.dtype}) "
            "must have one dtype"
        )
    for name, t in (
        ("key", key),
        ("value", value),
        ("key_cache", key_cache),
        ("value_cache", value_cache),
    ):
        check_last_dim_contiguous(op, name, t)
    check_launch_device(
        _reshape_and_cache_kernel, op, key, value, key_cache, value_cache, slot_mapping
    )
    if key.shape[1] == 0:
        return
    write_kv_unchecked(key, value, key_cache, value_cache, slot_mapping)


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    max_query_len: int,
    *,
    decode_splits: int | None = None,
) -> torch.Tensor:
    """Causal paged attention of ``query`` ``[T, Hq, D]`` into ``output``; returns ``output``.

    The contract of every path (``reference_kernels/paged_attention/contract.py``):
    ``output`` shaped like ``query``; caches ``[num_blocks, Hkv, block_size, D]``
    of the query's dtype, ``Hq % Hkv == 0``; ``block_table`` ``[num_reqs,
    max_blocks]``, ``seq_lens`` ``[num_reqs]`` (context + new tokens, already in
    the cache), ``query_start_loc`` ``[num_reqs + 1]``, all int32.
    ``max_query_len``: the batch's longest query (1 = every request decodes one
    token: the split-KV kernel). ``decode_splits``: force the decode kernel's
    split count (tests, tuning); None picks it from the batch shape. Each call
    plans anew (scratch allocated here); ``TEMPLATE_ATTN`` keeps a planner per
    KV-cache group instead (:class:`TritonAttentionPlanner`).
    Queries not owned by a request (past ``query_start_loc[-1]``) are left
    untouched in ``output``.
    """
    op = "paged_attention"
    check_attention(
        op, query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc
    )
    for name, t in (
        ("query", query),
        ("output", output),
        ("key_cache", key_cache),
        ("value_cache", value_cache),
        ("block_table", block_table),
    ):
        check_last_dim_contiguous(op, name, t)
    check_launch_device(
        _paged_attention_kernel,
        op,
        query,
        key_cache,
        value_cache,
        output,
        block_table,
        seq_lens,
        query_start_loc,
    )
    num_tokens, num_heads, head_size = query.shape
    num_reqs = seq_lens.shape[0]
    layout = AttentionLayout(
        num_heads, key_cache.shape[1], head_size, query.dtype, key_cache.shape[2]
    )
    planner = TritonAttentionPlanner(layout, num_reqs, query.device, decode_splits=decode_splits)
    plan = planner.plan(num_reqs=num_reqs, num_tokens=num_tokens, max_query_len=max_query_len)
    attend_unchecked(
        query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc, scale, plan
    )
    return output

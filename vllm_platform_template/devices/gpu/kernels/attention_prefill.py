"""The general attention kernel (prefills and mixed batches), and its tile.

It packs ``BLOCK_Q`` query tokens x all ``Hq // Hkv`` heads of one KV head into
a ``BLOCK_M``-row tile (so each K/V tile is loaded once for the whole head group)
and walks the keys in ``TILE_N`` steps (:func:`attention_tile._attend_tile`);
whole tiles every row sees skip the causal mask. Its flat grid maps programs to
requests by a binary search over ``query_start_loc``, so the grid depends on the
number of tokens and requests only. :func:`prefill_launch_config` picks the
tile from the longest query, the group and the head size.

vLLM hook served: ``TEMPLATE_ATTN``'s attention for batches with a query longer
than one token, planned by ``paged_attention.TritonAttentionPlanner``.
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on
the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import next_power_of_2
from vllm_platform_template.devices.gpu.kernels.attention_tile import (
    LOG2E,
    _attend_tile,
    _dot,
    _softmax_step,
)

__all__ = [
    "AttentionLaunchConfig",
    "PrefillConfig",
    "prefill_attention_unchecked",
    "prefill_launch_config",
    "prefill_tile",
]


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


# --------------------------------------------------------------------------
# Prefill over the new tokens' own keys (contiguous), the cached context paged
# --------------------------------------------------------------------------


@triton.jit
def _attend_rows(
    q,
    m_i,
    l_i,
    acc,
    k_rows,
    k_tok_stride,
    v_rows,
    v_tok_stride,
    n,
    n_in,
    i,
    d,
    d_ok,
    qk_scale,
    IEEE_DOT: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """One online-softmax step over the new keys ``n`` (rows ``n`` of ``k_rows``/``v_rows``;
    ``n_in``: the ones inside the request). ``CAUSAL``: row ``i`` sees keys ``n <= i``
    (the diagonal); otherwise every row sees every key of the tile."""
    n64 = n.to(tl.int64)
    k = tl.load(k_rows + n64[:, None] * k_tok_stride + d[None, :],
                mask=n_in[:, None] & d_ok[None, :], other=0.0)  # fmt: skip
    s = _dot(q, tl.trans(k), IEEE_DOT) * qk_scale
    if CAUSAL:
        s = tl.where((n[None, :] <= i[:, None]) & n_in[None, :], s, float("-inf"))
    m_i, l_i, p, alpha = _softmax_step(s, m_i, l_i)
    v = tl.load(v_rows + n64[:, None] * v_tok_stride + d[None, :],
                mask=n_in[:, None] & d_ok[None, :], other=0.0)  # fmt: skip
    return m_i, l_i, acc * alpha[:, None] + _dot(p.to(v.dtype), v, IEEE_DOT)


@triton.jit(do_not_specialize=["bt_stride", "bt_cols", "num_blocks", "num_reqs"])
def _prefill_attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    kc_ptr,
    vc_ptr,
    out_ptr,
    bt_ptr,
    seq_lens_ptr,
    qsl_ptr,
    q_tok_stride,
    q_head_stride,
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
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    IEEE_DOT: tl.constexpr,
):
    """Causal attention of ``BLOCK_M`` query tokens of one request and one query head.

    Keys ``0 .. context - 1`` (``context = seq_len - q_len``: what earlier steps
    cached) are read through the block table; the request's own new keys are read
    where the step holds them, ``key``/``value`` rows ``query_start_loc[r] + j``
    (contiguous, no table lookup). New keys before the block's first query are
    seen whole by every row (no mask); the block's diagonal applies the causal mask.
    """
    q_block = tl.program_id(0)
    head = tl.program_id(1)
    req = _find_request(qsl_ptr, q_block, num_reqs, BLOCK_M)
    q_start = tl.load(qsl_ptr + req)
    q_len = tl.load(qsl_ptr + req + 1) - q_start
    first = (q_block - (q_start // BLOCK_M + req)) * BLOCK_M  # the block's first query
    if first >= q_len:
        return
    context = tl.load(seq_lens_ptr + req) - q_len
    kv_head = (head // GROUP).to(tl.int64)
    i = first + tl.arange(0, BLOCK_M)  # the rows' query index in the request
    row_ok = i < q_len
    d = tl.arange(0, BLOCK_D)
    d_ok = d < head_size
    q_tok = (q_start + i).to(tl.int64)
    q_rows = q_ptr + q_tok[:, None] * q_tok_stride + head.to(tl.int64) * q_head_stride
    q = tl.load(q_rows + d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # 1. The cached context: every row sees all of it.
    bt_row = bt_ptr + req.to(tl.int64) * bt_stride
    kc_head = kc_ptr + kv_head * kc_head_stride
    vc_head = vc_ptr + kv_head * vc_head_stride
    for start in range(0, context, BLOCK_N):
        kpos = start + tl.arange(0, BLOCK_N)
        k_in = kpos < context
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
            kc_head,
            kc_block_stride,
            kc_tok_stride,
            vc_head,
            vc_block_stride,
            vc_tok_stride,
            block_size,
            d,
            d_ok,
            qk_scale,
            IEEE_DOT,
            True,
        )

    # 2. The new keys, contiguous rows of ``key``/``value`` from the request's first token.
    k_rows = k_ptr + q_start.to(tl.int64) * k_tok_stride + kv_head * k_head_stride
    v_rows = v_ptr + q_start.to(tl.int64) * v_tok_stride + kv_head * v_head_stride
    for start in range(0, first, BLOCK_N):  # before the diagonal: whole tiles, no mask
        n = start + tl.arange(0, BLOCK_N)
        m_i, l_i, acc = _attend_rows(q, m_i, l_i, acc, k_rows, k_tok_stride, v_rows,
                                     v_tok_stride, n, n >= 0, i, d, d_ok, qk_scale,
                                     IEEE_DOT, False)  # fmt: skip
    for start in range(first, tl.minimum(first + BLOCK_M, q_len), BLOCK_N):  # the diagonal
        n = start + tl.arange(0, BLOCK_N)
        m_i, l_i, acc = _attend_rows(q, m_i, l_i, acc, k_rows, k_tok_stride, v_rows,
                                     v_tok_stride, n, n < q_len, i, d, d_ok, qk_scale,
                                     IEEE_DOT, True)  # fmt: skip
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    out_rows = out_ptr + q_tok[:, None] * out_tok_stride + head.to(tl.int64) * out_head_stride
    tl.store(out_rows + d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & d_ok[None, :])  # fmt: skip


@dataclass(frozen=True)
class PrefillConfig:
    """Tile of :func:`_prefill_attention_kernel`: query rows and keys per step."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def prefill_tile(max_query_len: int, head_size: int, element_size: int = 2) -> PrefillConfig:
    """The prefill kernel's tile for a batch whose longest query is ``max_query_len``.

    64 query rows by 64 keys, four warps, two stages: on an H100 (bf16, Llama 3 8B's
    32/8 heads of 128) the fastest or within 5% of it of eight tiles for 1x2048,
    1x4096 and 8x1024 new tokens, 1.3-1.7x the general kernel. Shorter queries
    (decode rows of a mixed batch) get 16 or 32 rows; 4-byte elements or head sizes
    above 128 at most 32 rows by 32 keys (the general kernel's register bound). The
    keys per step never exceed the rows: the kernel's whole tiles end where the
    block's first query begins.
    """
    block_m = 16 if max_query_len <= 16 else 32 if max_query_len <= 32 else 64
    block_n = 64
    if element_size > 2 or max(16, next_power_of_2(head_size)) > 128:
        block_m, block_n = min(block_m, 32), 32
    return PrefillConfig(block_m, min(block_n, block_m), num_warps=4, num_stages=2)


def prefill_attention_unchecked(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    config: PrefillConfig,
) -> None:
    """Causal attention of ``query`` ``[T, Hq, D]`` over each request's cached context
    (through ``block_table``) and its own new ``key``/``value`` ``[T, Hkv, D]`` rows.

    The keys ``paged_attention`` reads from the cache after the step's KV write,
    read here where the step already holds them; unchecked (the caller checked the
    layout). The grid depends on tokens, requests and query heads only.
    """
    num_tokens, num_heads, head_size = query.shape
    num_reqs = seq_lens.shape[0]
    if num_tokens == 0 or num_reqs == 0:
        return
    if config.block_m % config.block_n:
        raise ValueError(f"block_m {config.block_m} is not a multiple of block_n {config.block_n}")
    grid = (num_tokens // config.block_m + num_reqs, num_heads)
    qs, ks, vs, os_ = query.stride(), key.stride(), value.stride(), output.stride()
    kcs, vcs = key_cache.stride(), value_cache.stride()
    _prefill_attention_kernel[grid](
        query, key, value, key_cache, value_cache, output, block_table, seq_lens,
        query_start_loc, qs[0], qs[1], ks[0], ks[1], vs[0], vs[1], kcs[0], kcs[1], kcs[2],
        vcs[0], vcs[1], vcs[2], os_[0], os_[1], block_table.stride(0), block_table.shape[1],
        key_cache.shape[0], num_reqs, key_cache.shape[2], head_size, float(scale) * LOG2E,
        GROUP=num_heads // key.shape[1], BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        BLOCK_D=max(16, next_power_of_2(head_size)), IEEE_DOT=query.dtype == torch.float32,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip

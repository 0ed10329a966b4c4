"""The split-KV decode kernel (every request decodes one token), and its merge.

Each (request, KV head) is split into ``num_splits`` key ranges run in parallel
(:func:`decode_num_splits`: from the batch shape and the multiprocessors, never
the sequence lengths; the warps, stages and keys per tile and per split follow
from the split count, :func:`decode_config`); each split folds its keys with
:func:`attention_tile._attend_tile` for all heads of the group at once, and a
small kernel merges the splits' partial softmax results. With one split the
kernel writes the output directly.

vLLM hook served: ``TEMPLATE_ATTN``'s attention for all-decode batches (the
steps FULL decode graphs capture), planned by
``paged_attention.TritonAttentionPlanner``.
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on
the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.identity import torch_module
from vllm_platform_template.devices.gpu.kernels import is_interpreted
from vllm_platform_template.devices.gpu.kernels.attention_tile import _attend_tile

__all__ = ["DecodeConfig", "decode_num_splits", "num_multiprocessors"]

DECODE_MIN_KEYS_PER_SPLIT = 64
"""A decode split covers at least this many keys (for short contexts the trailing
splits find nothing to do): :data:`SHORT_SHARES`'s; :data:`LONG_SHARES` takes 128."""

DECODE_MAX_SPLITS = 64

DECODE_PROGRAMS_PER_SM = 2
"""Decode programs (request x KV head x split) aimed at per multiprocessor."""

DECODE_TILE_N = 64
"""Keys per step of the decode kernel (32 for head sizes above 128)."""

DECODE_NUM_WARPS = 4
DECODE_NUM_STAGES = 2
COMBINE_NUM_WARPS = 4


@dataclass(frozen=True)
class DecodeConfig:
    """Launch parameters of the split-KV decode kernel and its merge (one layout's).

    ``tile_n``: keys per step; ``min_keys``: keys a split covers at least (a multiple
    of ``tile_n``); ``programs_per_sm``: decode programs (request x KV head x split)
    aimed at per multiprocessor, which fixes the split count; warps and stages of
    the decode kernel, warps of the merge. The planner's choice for a batch shape is
    :func:`decode_config`'s; ``benchmarks/gpu_decode_kernel.py`` sweeps the others.
    """

    tile_n: int = DECODE_TILE_N
    min_keys: int = DECODE_MIN_KEYS_PER_SPLIT
    num_warps: int = DECODE_NUM_WARPS
    num_stages: int = DECODE_NUM_STAGES
    programs_per_sm: int = DECODE_PROGRAMS_PER_SM
    combine_warps: int = COMBINE_NUM_WARPS

    def num_splits(self, num_reqs: int, num_kv_heads: int, num_multiprocessors: int) -> int:
        """Key splits per (request, KV head): :func:`decode_num_splits` at this config's
        programs per multiprocessor."""
        return _num_splits(num_reqs, num_kv_heads, num_multiprocessors, self.programs_per_sm)


SHORT_SPLITS = 8
"""From this many splits on (each a share of an eighth of the keys or less: four
64-key tiles of a 2048-key context), a plan takes :data:`SHORT_SHARES`."""

SHORT_SHARES = DecodeConfig(tile_n=64, min_keys=64, num_warps=8, num_stages=1, combine_warps=2)
"""Many splits (few (request, KV head) pairs): each program's share of the keys a few
tiles, its latency the step's - eight warps on a 64-key tile, no software pipeline
(little to overlap across few tiles), splits of 64 keys at least so that short
contexts still spread over several programs."""

LONG_SHARES = DecodeConfig(tile_n=64, min_keys=128, num_warps=4, num_stages=2, combine_warps=1)
"""Fewer splits: long shares streamed - four warps on 64-key tiles, two stages in flight."""


def decode_config(
    block_d: int, num_reqs: int, num_kv_heads: int, num_multiprocessors: int
) -> DecodeConfig:
    """The planner's decode launch parameters for a batch shape and a head tile of
    ``block_d`` (a power of two): :data:`SHORT_SHARES` when the shape splits each
    (request, KV head) :data:`SHORT_SPLITS` ways or more (:func:`decode_num_splits`),
    else :data:`LONG_SHARES`; 32 keys per step above 128 dimensions (registers). Like
    the split count, from the batch shape only, never the sequence lengths.

    Swept on an H100 at Llama 3 8B's heads (``benchmarks/gpu_decode_kernel.py
    --sweep``): the batches of 1 and 4 (33 and 9 splits) chose the first, those of 17
    and 32 (2 splits) the second or a close neighbour; at 8 and 16 (5 and 3 splits)
    the first lost to the old single plan over 2048 keys (by 23 and 37 %), the second
    matched or beat it at every batch measured (4 to 64, over 256 and 2048 keys).
    """
    splits = decode_num_splits(num_reqs, num_kv_heads, num_multiprocessors)
    config = SHORT_SHARES if splits >= SHORT_SPLITS else LONG_SHARES
    if block_d > 128 and config.tile_n > 32:
        config = dataclasses.replace(config, tile_n=32)
    return config


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
    return _num_splits(num_reqs, num_kv_heads, num_multiprocessors, DECODE_PROGRAMS_PER_SM)


def _num_splits(
    num_reqs: int, num_kv_heads: int, num_multiprocessors: int, programs_per_sm: int
) -> int:
    programs = max(1, num_reqs * num_kv_heads)
    wanted = triton.cdiv(programs_per_sm * num_multiprocessors, programs)
    return max(1, min(wanted, DECODE_MAX_SPLITS))

"""Paged attention in plain torch: the specification the device paths are tested against.

Semantics (matching vLLM's ``CPU_ATTN`` backend for causal decoder attention):

* KV write (``reshape_and_cache_``): token ``i`` with ``slot = slot_mapping[i] >= 0``
  lands at ``key_cache[slot // block_size, :, slot % block_size, :]`` (same for
  values); ``slot < 0`` skips the token (padding).
* Attention (``paged_attention``): request ``r`` owns query rows
  ``query_start_loc[r] : query_start_loc[r + 1]`` (``q_len`` rows) and a context of
  ``seq_len = seq_lens[r]`` tokens - already in the cache, *including* the new
  ones - stored in blocks ``block_table[r, :ceil(seq_len / block_size)]``. Query
  row ``i`` sits at position ``p = seq_len - q_len + i`` and attends to key
  positions ``j <= p``. Query head ``h`` reads KV head ``h // (num_heads //
  num_kv_heads)``. Math in fp32; the result is cast to ``output.dtype``.

Only cache positions ``< seq_len`` of a request are ever read, so stale or NaN
data in unused slots cannot leak into the result. Output rows after
``query_start_loc[-1]`` (padding) are left untouched.

The cache layout, plain interior, is ``contract.py``'s.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_platform_template.reference_kernels.paged_attention.contract import (
    AttentionLayout,
    check_attention,
    check_dim,
    check_kv_write,
)


def split_kv_cache(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-layer cache ``[B, H, N, 2D]`` -> ``(key_cache, value_cache)``, each ``[B, H, N, D]``.

    The two halves of a ``(block, kv_head)`` page of ``N * 2D`` elements are the
    key slab (first ``N * D``) and the value slab (last ``N * D``); both are views.
    """
    op = "split_kv_cache"
    check_dim(op, "kv_cache", kv_cache, 4, "[num_blocks, num_kv_heads, block_size, 2 * head_size]")
    num_blocks, num_kv_heads, block_size, two_d = kv_cache.shape
    if two_d % 2 != 0:
        raise ValueError(f"{op}: last dimension must be 2 * head_size, got {two_d}")
    kv = kv_cache.view(num_blocks, num_kv_heads, 2 * block_size, two_d // 2)
    key_cache, value_cache = kv.chunk(2, dim=2)
    return key_cache, value_cache


def reshape_and_cache_(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write ``key``/``value`` ``[T, Hkv, D]`` into the caches at ``slot_mapping`` (int64).

    ``slot_mapping`` has one entry per token to write (``<= T``; extra key rows are
    padding and ignored); negative slots are skipped.
    """
    op = "reshape_and_cache_"
    check_kv_write(op, key, value, key_cache, value_cache, slot_mapping)
    num_tokens = slot_mapping.shape[0]
    num_blocks, _, block_size, _ = key_cache.shape
    slots = slot_mapping.to(key_cache.device)
    valid = slots >= 0
    slots = slots[valid]
    if slots.numel() and int(slots.max()) >= num_blocks * block_size:
        raise ValueError(
            f"{op}: slot {int(slots.max())} is outside the cache "
            f"({num_blocks} blocks x {block_size} slots)"
        )
    blocks = slots // block_size
    offsets = slots % block_size
    # Advanced indexing on dims 0 and 2 with a full slice between: [n_valid, Hkv, D].
    key_cache[blocks, :, offsets, :] = key[:num_tokens][valid].to(key_cache.dtype)
    value_cache[blocks, :, offsets, :] = value[:num_tokens][valid].to(value_cache.dtype)


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Causal paged attention over a mixed prefill/decode batch; writes and returns ``output``.

    Shapes: ``query``/``output`` ``[T, Hq, D]``; caches ``[B, Hkv, N, D]``;
    ``block_table`` int32 ``[num_reqs, max_blocks]``; ``seq_lens`` int32
    ``[num_reqs]``; ``query_start_loc`` int32 ``[num_reqs + 1]``.
    """
    op = "paged_attention"
    check_attention(
        op, query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc
    )
    num_tokens, num_heads, head_size = query.shape
    num_kv_heads, block_size = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    starts = query_start_loc.tolist()
    lens = seq_lens.tolist()
    if starts[-1] > num_tokens:
        raise ValueError(
            f"{op}: query_start_loc ends at {starts[-1]} but query has {num_tokens} tokens"
        )

    for r, seq_len in enumerate(lens):
        q_start, q_end = starts[r], starts[r + 1]
        q_len = q_end - q_start
        if q_len < 0 or q_len > seq_len:
            raise ValueError(
                f"{op}: request {r} has {q_len} query tokens and seq_len {seq_len}; need "
                "0 <= q_len <= seq_len (seq_len counts the new tokens)"
            )
        if q_len == 0:
            continue
        num_blocks = (seq_len + block_size - 1) // block_size
        if num_blocks > block_table.shape[1]:
            raise ValueError(
                f"{op}: request {r} needs {num_blocks} blocks, block_table has "
                f"{block_table.shape[1]} columns"
            )
        blocks = block_table[r, :num_blocks].to(device=key_cache.device, dtype=torch.long)
        # [nb, Hkv, N, D] -> [Hkv, nb * N, D] -> first seq_len positions only.
        k = key_cache[blocks].permute(1, 0, 2, 3).reshape(num_kv_heads, -1, head_size)
        v = value_cache[blocks].permute(1, 0, 2, 3).reshape(num_kv_heads, -1, head_size)
        k = k[:, :seq_len].float().unsqueeze(1)  # [Hkv, 1, S, D]
        v = v[:, :seq_len].float().unsqueeze(1)

        # [q_len, Hq, D] -> [Hkv, group, q_len, D]: query head h reads KV head h // group.
        q = query[q_start:q_end].float().transpose(0, 1) * scale
        q = q.reshape(num_kv_heads, group, q_len, head_size)
        logits = torch.matmul(q, k.transpose(-1, -2))  # [Hkv, group, q_len, S]

        q_pos = torch.arange(seq_len - q_len, seq_len, device=query.device)
        k_pos = torch.arange(seq_len, device=query.device)
        visible = k_pos[None, :] <= q_pos[:, None]  # [q_len, S]
        logits = logits.masked_fill(~visible, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        out = torch.matmul(probs, v)  # [Hkv, group, q_len, D]
        out = out.reshape(num_heads, q_len, head_size).transpose(0, 1)
        output[q_start:q_end] = out.to(output.dtype)
    return output


class NoPlanner:
    """A planner for kernels that need no per-step state (``plan`` is None)."""

    def plan(self, **batch: Any) -> None:
        return None


class ReferenceAttentionKernels:
    """The reference as ``AttentionKernels`` (``device.AttentionKernels``): runs on any
    device, any head size; ``TEMPLATE_ATTN`` falls back to it where a device has no
    kernels, and ``attention="reference"`` selects it. It reads the lengths on the
    host, so no graph can hold it (``full_graphs`` False); it checks every call."""

    name = "reference"
    head_sizes: tuple[int, ...] = ()  # any
    full_graphs = False
    rope_and_write_kv = None  # rotary and KV write are two kernels (write_kv)

    def config_problem(self, dtype: torch.dtype, block_size: int, head_size: int) -> str | None:
        return None

    def planner(
        self, layout: AttentionLayout, max_num_reqs: int, device: torch.device
    ) -> NoPlanner:
        return NoPlanner()

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        reshape_and_cache_(key, value, key_cache, value_cache, slot_mapping)

    def attend(
        self,
        query: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        output: torch.Tensor,
        *,
        block_table: torch.Tensor,
        seq_lens: torch.Tensor,
        query_start_loc: torch.Tensor,
        scale: float,
        plan: Any,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
    ) -> None:
        paged_attention(
            query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc, scale
        )

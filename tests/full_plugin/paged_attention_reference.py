"""Paged attention's semantics in plain torch, the reference the kernel tests compare with.

Written apart from the plugin's own reference kernels (``reference_kernels/``) so a
test never checks code against itself; used by the Triton kernels' tests on the
device (``tests/devices/gpu/speed_tier/test_triton_kernels.py``) and in Triton's CPU interpreter
(``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py``).
"""

from __future__ import annotations

import torch


def split_kv_cache(kv_cache):
    """[B, Hkv, N, 2D] layer cache -> (key_cache, value_cache), each [B, Hkv, N, D]."""
    num_blocks, num_kv_heads, block_size, _ = kv_cache.shape
    kv = kv_cache.view(num_blocks, num_kv_heads, 2 * block_size, -1)
    key_cache, value_cache = kv.chunk(2, dim=2)
    return key_cache, value_cache


def ref_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
    """Plain-layout cache write; slots < 0 are skipped."""
    num_tokens = slot_mapping.shape[0]  # the KV-write contract: rows past it are padding
    block_size = key_cache.shape[2]
    slots = slot_mapping.to(torch.int64)
    valid = slots >= 0
    slots = slots[valid]
    blk, off = slots // block_size, slots % block_size
    key_cache[blk, :, off, :] = key[:num_tokens][valid].to(key_cache.dtype)
    value_cache[blk, :, off, :] = value[:num_tokens][valid].to(value_cache.dtype)


def ref_paged_attention(
    query, key_cache, value_cache, block_table, seq_lens, query_start_loc, scale
):
    """Causal paged attention over a mixed batch in float32 (plain cache layout)."""
    num_heads, head_size = query.shape[1:]
    num_kv_heads, block_size = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    output = torch.empty_like(query)
    qsl, sls = query_start_loc.tolist(), seq_lens.tolist()
    for r, seq_len in enumerate(sls):
        q_start, q_end = qsl[r], qsl[r + 1]
        q_len = q_end - q_start
        if q_len == 0:
            continue
        blocks = block_table[r, : (seq_len + block_size - 1) // block_size].to(torch.int64)
        k = key_cache[blocks].permute(1, 0, 2, 3).reshape(num_kv_heads, -1, head_size)
        v = value_cache[blocks].permute(1, 0, 2, 3).reshape(num_kv_heads, -1, head_size)
        k = k[:, :seq_len].float().repeat_interleave(group, dim=0)
        v = v[:, :seq_len].float().repeat_interleave(group, dim=0)
        q = query[q_start:q_end].float().transpose(0, 1) * scale
        logits = torch.matmul(q, k.transpose(1, 2))
        q_pos = torch.arange(seq_len - q_len, seq_len, device=query.device)
        visible = torch.arange(seq_len, device=query.device)[None, :] <= q_pos[:, None]
        logits = logits.masked_fill(~visible, float("-inf"))
        out = torch.matmul(torch.softmax(logits, dim=-1), v)
        output[q_start:q_end] = out.transpose(0, 1).to(output.dtype)
    return output

"""Paged-attention batches, caches and bad arguments: the cases every attention kernel meets.

Shared by the reference kernels' tests (``tests/shared/test_attention_kernels.py``) and each
device's (``test_cpu_attention_kernels.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from vllm_platform_template.reference_kernels.paged_attention import reference

NUM_HEADS, NUM_KV_HEADS = 8, 2  # grouped-query: 4 query heads per KV head


# (context tokens already cached, new query tokens) per request.
BATCHES = {
    "prefill": [(0, 37), (0, 70)],
    "decode": [(45, 1), (130, 1), (7, 1)],
    "mixed": [(0, 50), (100, 1), (33, 17), (250, 1)],
}


@dataclass
class Batch:
    """One step: cached context, new tokens (with padding rows), paging tables."""

    keys: list[torch.Tensor]  # per request [seq_len, Hkv, D]: every position's key
    values: list[torch.Tensor]
    ctx_key: torch.Tensor  # context tokens (+2 padding rows), written first
    ctx_value: torch.Tensor
    ctx_slots: torch.Tensor
    new_key: torch.Tensor  # this step's tokens (+3 padding rows)
    new_value: torch.Tensor
    new_slots: torch.Tensor
    query: torch.Tensor  # [num_new + 3, Hq, D]
    num_tokens: int  # real query rows
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor
    num_blocks: int
    block_size: int
    scale: float


def make_batch(
    requests: list[tuple[int, int]], head_size: int, block_size: int, dtype: torch.dtype
) -> Batch:
    gen = torch.Generator().manual_seed(1234 + block_size + head_size)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dtype)

    seq_lens = [ctx + q for ctx, q in requests]
    blocks_per_req = [math.ceil(s / block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_req) + 3  # a few never-used blocks
    pool = torch.randperm(num_blocks, generator=gen).tolist()
    block_table = torch.zeros(len(requests), max(blocks_per_req) + 1, dtype=torch.int32)
    for r, nb in enumerate(blocks_per_req):
        block_table[r, :nb] = torch.tensor([pool.pop() for _ in range(nb)], dtype=torch.int32)

    keys = [randn(s, NUM_KV_HEADS, head_size) for s in seq_lens]
    values = [randn(s, NUM_KV_HEADS, head_size) for s in seq_lens]

    def slot(r: int, pos: int) -> int:
        return int(block_table[r, pos // block_size]) * block_size + pos % block_size

    def rows(ranges: list[range], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = [keys[r][list(rg)] for r, rg in enumerate(ranges)]
        v = [values[r][list(rg)] for r, rg in enumerate(ranges)]
        k.append(randn(pad, NUM_KV_HEADS, head_size))  # padding rows: never written
        v.append(randn(pad, NUM_KV_HEADS, head_size))
        slots = [slot(r, p) for r, rg in enumerate(ranges) for p in rg] + [-1] * pad
        return torch.cat(k), torch.cat(v), torch.tensor(slots, dtype=torch.int64)

    ctx_key, ctx_value, ctx_slots = rows([range(ctx) for ctx, _ in requests], pad=2)
    new_key, new_value, new_slots = rows([range(ctx, ctx + q) for ctx, q in requests], pad=3)
    num_tokens = sum(q for _, q in requests)
    starts = [0]
    for _, q in requests:
        starts.append(starts[-1] + q)
    return Batch(
        keys=keys,
        values=values,
        ctx_key=ctx_key,
        ctx_value=ctx_value,
        ctx_slots=ctx_slots,
        new_key=new_key,
        new_value=new_value,
        new_slots=new_slots,
        query=randn(num_tokens + 3, NUM_HEADS, head_size),
        num_tokens=num_tokens,
        block_table=block_table,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        query_start_loc=torch.tensor(starts, dtype=torch.int32),
        num_blocks=num_blocks,
        block_size=block_size,
        scale=head_size**-0.5,
    )


def new_kv_cache(b: Batch, dtype: torch.dtype, fill: float = 0.0) -> torch.Tensor:
    """The per-layer cache vLLM allocates for LBHNC: [B, Hkv, N, 2D]."""
    head_size = b.query.shape[-1]
    shape = (b.num_blocks, NUM_KV_HEADS, b.block_size, 2 * head_size)
    return torch.full(shape, fill, dtype=dtype)


def run_reference(b: Batch, kv_cache: torch.Tensor) -> torch.Tensor:
    key_cache, value_cache = reference.split_kv_cache(kv_cache)
    reference.reshape_and_cache_(b.ctx_key, b.ctx_value, key_cache, value_cache, b.ctx_slots)
    reference.reshape_and_cache_(b.new_key, b.new_value, key_cache, value_cache, b.new_slots)
    n = b.num_tokens
    output = torch.empty_like(b.query[:n])
    return reference.paged_attention(
        b.query[:n],
        key_cache,
        value_cache,
        output,
        b.block_table,
        b.seq_lens,
        b.query_start_loc,
        b.scale,
    )


def attention_args(b: Batch, kv_cache: torch.Tensor) -> dict:
    key_cache, value_cache = reference.split_kv_cache(kv_cache)
    n = b.num_tokens
    return {
        "query": b.query[:n],
        "key_cache": key_cache,
        "value_cache": value_cache,
        "output": torch.empty_like(b.query[:n]),
        "block_table": b.block_table,
        "seq_lens": b.seq_lens,
        "query_start_loc": b.query_start_loc,
        "scale": b.scale,
    }


BAD_ATTENTION_ARGS = {
    "seq_lens int64": (lambda a: {"seq_lens": a["seq_lens"].long()}, "seq_lens has dtype"),
    "block_table int64": (
        lambda a: {"block_table": a["block_table"].long()},
        "block_table has dtype",
    ),
    "query_start_loc int64": (
        lambda a: {"query_start_loc": a["query_start_loc"].long()},
        "query_start_loc has dtype",
    ),
    "query_start_loc length": (
        lambda a: {"query_start_loc": a["query_start_loc"][:-1]},
        "num_reqs \\+ 1",
    ),
    "output shape": (lambda a: {"output": a["output"][:-1]}, "output shape"),
    "query 2-D": (lambda a: {"query": a["query"].flatten(1)}, "query must be"),
    "heads not divisible": (
        lambda a: {"query": a["query"][:, :7], "output": a["output"][:, :7]},
        "multiple of num_kv_heads",
    ),
    "head size mismatch": (
        lambda a: {"query": a["query"][..., :32], "output": a["output"][..., :32]},
        "head_size",
    ),
    "index dtype float": (lambda a: {"seq_lens": a["seq_lens"].float()}, "expected int32"),
}

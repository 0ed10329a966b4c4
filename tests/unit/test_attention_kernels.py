"""The reference paged attention of TEMPLATE_ATTN: against dense truth, and its input checks.

Engine-free. The helpers here (``make_batch``, ``new_kv_cache``,
``run_reference``, ``attention_args``, ``BAD_ATTENTION_ARGS``) also serve the
tests of a device's own attention kernels: those write the KV cache with their
*own* writer (their interior layout may differ), so they are compared with the
reference on attention outputs, never on cache bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
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


def dense_truth(b: Batch) -> torch.Tensor:
    """Causal GQA attention in float64 straight from the per-request K/V (no paging)."""
    outs = []
    group = NUM_HEADS // NUM_KV_HEADS
    starts = b.query_start_loc.tolist()
    for r, seq_len in enumerate(b.seq_lens.tolist()):
        q = b.query[starts[r] : starts[r + 1]].double()  # [q_len, Hq, D]
        q_len = q.shape[0]
        k = b.keys[r].double().repeat_interleave(group, dim=1)  # [S, Hq, D]
        v = b.values[r].double().repeat_interleave(group, dim=1)
        logits = torch.einsum("qhd,khd->hqk", q, k) * b.scale
        q_pos = torch.arange(seq_len - q_len, seq_len)[:, None]
        logits = logits.masked_fill(torch.arange(seq_len)[None, :] > q_pos, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", logits.softmax(-1), v))
    return torch.cat(outs)


# --------------------------------------------------------------------------
# Reference semantics
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(BATCHES))
@pytest.mark.parametrize("block_size", [16, 32, 128])
def test_reference_matches_dense_attention(kind: str, block_size: int) -> None:
    b = make_batch(BATCHES[kind], 64, block_size, torch.float32)
    out = run_reference(b, new_kv_cache(b, torch.float32))
    torch.testing.assert_close(out.double(), dense_truth(b), atol=1e-5, rtol=1e-5)


def test_reference_ignores_nan_in_unused_slots() -> None:
    b = make_batch(BATCHES["mixed"], 64, 32, torch.float32)
    clean = run_reference(b, new_kv_cache(b, torch.float32))
    poisoned = run_reference(b, new_kv_cache(b, torch.float32, fill=float("nan")))
    assert torch.isfinite(poisoned).all()
    torch.testing.assert_close(poisoned, clean, atol=0, rtol=0)


def test_reference_leaves_padding_rows_untouched() -> None:
    b = make_batch(BATCHES["mixed"], 64, 32, torch.float32)
    key_cache, value_cache = reference.split_kv_cache(new_kv_cache(b, torch.float32))
    reference.reshape_and_cache_(b.new_key, b.new_value, key_cache, value_cache, b.new_slots)
    output = torch.full_like(b.query, 7.0)  # all rows, padding included
    reference.paged_attention(
        b.query, key_cache, value_cache, output, b.block_table, b.seq_lens,
        b.query_start_loc, b.scale,
    )  # fmt: skip
    assert (output[b.num_tokens :] == 7.0).all()


def test_reference_writer_skips_negative_slots_and_uses_plain_layout() -> None:
    kv_cache = torch.zeros(4, 2, 16, 2 * 32)
    key_cache, value_cache = reference.split_kv_cache(kv_cache)
    key, value = torch.randn(3, 2, 32), torch.randn(3, 2, 32)
    reference.reshape_and_cache_(
        key, value, key_cache, value_cache, torch.tensor([16 * 2 + 5, -1, 3])
    )
    torch.testing.assert_close(key_cache[2, :, 5], key[0])
    torch.testing.assert_close(value_cache[0, :, 3], value[2])
    assert int((key_cache != 0).any(-1).sum()) == 2 * 2  # two tokens x two heads, no more


# --------------------------------------------------------------------------
# Input validation (ValueError before touching memory)
# --------------------------------------------------------------------------


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


@pytest.mark.parametrize("case", list(BAD_ATTENTION_ARGS))
def test_reference_attention_rejects_bad_inputs(case: str) -> None:
    mutate, message = BAD_ATTENTION_ARGS[case]
    b = make_batch(BATCHES["mixed"], 64, 32, torch.float32)
    args = attention_args(b, new_kv_cache(b, torch.float32))
    args.update(mutate(args))
    with pytest.raises(ValueError, match=message):
        reference.paged_attention(**args)


def test_reference_attention_rejects_inconsistent_lengths() -> None:
    b = make_batch(BATCHES["mixed"], 64, 32, torch.float32)
    args = attention_args(b, new_kv_cache(b, torch.float32))
    with pytest.raises(ValueError, match="q_len <= seq_len"):
        reference.paged_attention(**{**args, "seq_lens": torch.ones_like(b.seq_lens)})
    with pytest.raises(ValueError, match="block_table has"):
        reference.paged_attention(**{**args, "block_table": b.block_table[:, :1]})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"slot_mapping": torch.tensor([0, 1], dtype=torch.int32)}, "slot_mapping has dtype"),
        ({"slot_mapping": torch.tensor([0, 1, 2, 3])}, "one slot per token"),
        ({"slot_mapping": torch.tensor([0, 999])}, "outside the cache"),
        ({"key": torch.randn(3, 2, 16), "value": torch.randn(3, 2, 16)}, "num_kv_heads, head"),
        ({"value": torch.randn(2, 2, 32)}, "value shape"),
    ],
)
def test_reference_writer_rejects_bad_inputs(change: dict, message: str) -> None:
    key_cache, value_cache = reference.split_kv_cache(torch.zeros(2, 2, 16, 64))
    args = {
        "key": torch.randn(3, 2, 32),
        "value": torch.randn(3, 2, 32),
        "key_cache": key_cache,
        "value_cache": value_cache,
        "slot_mapping": torch.tensor([0, 1, -1]),
    }
    args.update(change)
    with pytest.raises(ValueError, match=message):
        reference.reshape_and_cache_(**args)


def test_split_kv_cache_rejects_odd_last_dim() -> None:
    with pytest.raises(ValueError, match="2 \\* head_size"):
        reference.split_kv_cache(torch.zeros(2, 2, 16, 63))
    with pytest.raises(ValueError, match="kv_cache must be"):
        reference.split_kv_cache(torch.zeros(2, 16, 64))

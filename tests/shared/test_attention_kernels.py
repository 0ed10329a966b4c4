"""The reference paged attention of TEMPLATE_ATTN: against dense truth, and its input checks.

Engine-free. The helpers here (``make_batch``, ``new_kv_cache``,
``run_reference``, ``attention_args``, ``BAD_ATTENTION_ARGS``) also serve the
tests of a device's own attention kernels: those write the KV cache with their
*own* writer (their interior layout may differ), so they are compared with the
reference on attention outputs, never on cache bytes.
"""

from __future__ import annotations

import pytest
import torch
from attention_cases import (
    BAD_ATTENTION_ARGS,
    BATCHES,
    NUM_HEADS,
    NUM_KV_HEADS,
    Batch,
    attention_args,
    make_batch,
    new_kv_cache,
    run_reference,
)

from vllm_platform_template.reference_kernels.paged_attention import reference


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

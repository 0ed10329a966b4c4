"""The paged-attention contract every kernel path keeps, and its checks (no vLLM import).

The KV-cache layout, stated here once: the per-layer cache vLLM allocates for
``KVCacheLayout.LBHNC`` is ``kv_cache[num_blocks, Hkv, block_size, 2 * D]``; each
``(block, kv_head)`` page of ``block_size * 2D`` elements is a key slab (first half)
and a value slab (second half), split by ``reference.split_kv_cache``::

    kv = kv_cache.view(num_blocks, Hkv, 2 * block_size, D)
    key_cache, value_cache = kv.chunk(2, dim=2)   # each [num_blocks, Hkv, block_size, D]

A token's slot is ``block_id * block_size + offset``. Inside a slab the *plain*
interior puts token ``t`` at row ``t`` (``key_cache[b, h, t]``): the reference and
a device folder's own kernels use it; vLLM's CPU kernels pick an
instruction-set-specific interior instead (keys transposed or AMX-packed), so a
cache one implementation wrote is read by the same one only.

One rule for all paths (the plain-torch reference, vLLM's CPU kernels, each
device folder's kernels):

- ``query``/``output``: ``[T, Hq, D]``, the same shape (callers slice both to
  the tokens to attend for), float32, bfloat16 or float16;
- ``key_cache``/``value_cache``: ``[num_blocks, Hkv, block_size, D]``, the
  query's dtype, ``Hq % Hkv == 0``;
- ``block_table`` ``[num_reqs, max_blocks]``, ``seq_lens`` ``[num_reqs]``,
  ``query_start_loc`` ``[num_reqs + 1]``: int32 (vLLM's
  ``CommonAttentionMetadata``);
- ``slot_mapping``: contiguous int64, one slot per token written, ``-1`` skips
  (:func:`check_slot_mapping`).

The public kernel functions check every call (:func:`check_kv_write`,
:func:`check_attention`). ``TEMPLATE_ATTN``'s layers check once per KV cache
(:func:`check_layer_cache`) and once for their first inputs
(:func:`check_layer_inputs`), then launch unchecked: what a layer passes does not
change shape class between steps, only its token count.

Each check raises ``ValueError`` naming the operation, the argument and what to
change, so a wrong call fails before any kernel touches memory. The checks read
shapes and dtypes only (no device synchronisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_dtype(op: str, name: str, t: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    """``t.dtype`` is one of ``dtypes``, else ``ValueError``."""
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        hint = f"; pass {name}.to(torch.{allowed})" if len(dtypes) == 1 else ""
        raise ValueError(f"{op}: {name} has dtype {t.dtype}, expected {allowed}{hint}")


def check_dim(op: str, name: str, t: torch.Tensor, ndim: int, shape_doc: str) -> None:
    """``t.dim() == ndim``, else ``ValueError`` quoting the expected shape."""
    if t.dim() != ndim:
        raise ValueError(f"{op}: {name} must be {shape_doc}, got shape {tuple(t.shape)}")


def check_slot_mapping(op: str, slot_mapping: torch.Tensor, num_tokens: int) -> int:
    """The KV-write contract every attention path keeps; returns the tokens to write.

    vLLM's (``reshape_and_cache_flash``): ``slot_mapping`` is a contiguous 1-D
    int64 tensor with one slot per token to write, at most ``num_tokens`` (the
    key rows, which may include padding rows that are not written); slot ``-1``
    skips a token.
    """
    check_dtype(op, "slot_mapping", slot_mapping, (torch.int64,))
    check_dim(op, "slot_mapping", slot_mapping, 1, "[num_tokens]")
    if slot_mapping.shape[0] > 1 and slot_mapping.stride(0) != 1:
        raise ValueError(
            f"{op}: slot_mapping must be contiguous, got stride {slot_mapping.stride(0)}; "
            "pass slot_mapping.contiguous()"
        )
    if slot_mapping.shape[0] > num_tokens:
        raise ValueError(
            f"{op}: slot_mapping has {slot_mapping.shape[0]} entries but key only "
            f"{num_tokens} tokens; one slot per token (-1 = skip)"
        )
    return int(slot_mapping.shape[0])


def check_kv_write(
    op: str,
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Arguments of ``reshape_and_cache_``: shapes agree, the slot contract holds."""
    check_dim(op, "key", key, 3, "[num_tokens, num_kv_heads, head_size]")
    check_dim(op, "key_cache", key_cache, 4, "[num_blocks, num_kv_heads, block_size, head_size]")
    if value.shape != key.shape:
        raise ValueError(f"{op}: value shape {tuple(value.shape)} != key {tuple(key.shape)}")
    if value_cache.shape != key_cache.shape:
        raise ValueError(
            f"{op}: value_cache shape {tuple(value_cache.shape)} != key_cache "
            f"{tuple(key_cache.shape)}"
        )
    if key.shape[1:] != (key_cache.shape[1], key_cache.shape[3]):
        raise ValueError(
            f"{op}: key has (num_kv_heads, head_size) = {tuple(key.shape[1:])} but the cache "
            f"holds {(key_cache.shape[1], key_cache.shape[3])}"
        )
    check_slot_mapping(op, slot_mapping, key.shape[0])
    check_dtype(op, "key", key, FLOAT_DTYPES)
    check_dtype(op, "key_cache", key_cache, FLOAT_DTYPES)


def check_attention(
    op: str,
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
) -> None:
    """Arguments of ``paged_attention``: shapes agree, index tensors are int32."""
    check_dim(op, "query", query, 3, "[num_tokens, num_heads, head_size]")
    check_dim(op, "key_cache", key_cache, 4, "[num_blocks, num_kv_heads, block_size, head_size]")
    if value_cache.shape != key_cache.shape:
        raise ValueError(
            f"{op}: value_cache shape {tuple(value_cache.shape)} != key_cache "
            f"{tuple(key_cache.shape)}"
        )
    if output.shape != query.shape:
        raise ValueError(
            f"{op}: output shape {tuple(output.shape)} != query {tuple(query.shape)}; "
            "slice both to the same number of tokens"
        )
    num_heads, head_size = query.shape[1], query.shape[2]
    num_kv_heads = key_cache.shape[1]
    if key_cache.shape[3] != head_size:
        raise ValueError(
            f"{op}: query head_size {head_size} != cache head_size {key_cache.shape[3]}"
        )
    if num_kv_heads == 0 or num_heads % num_kv_heads != 0:
        raise ValueError(
            f"{op}: num_heads ({num_heads}) must be a multiple of num_kv_heads "
            f"({num_kv_heads}) for grouped-query attention"
        )
    check_dtype(op, "query", query, FLOAT_DTYPES)
    check_dtype(op, "output", output, FLOAT_DTYPES)
    check_dtype(op, "key_cache", key_cache, (query.dtype,))
    for name, t, ndim, doc in (
        ("block_table", block_table, 2, "[num_reqs, max_blocks_per_req]"),
        ("seq_lens", seq_lens, 1, "[num_reqs]"),
        ("query_start_loc", query_start_loc, 1, "[num_reqs + 1]"),
    ):
        check_dtype(op, name, t, (torch.int32,))
        check_dim(op, name, t, ndim, doc)
    num_reqs = seq_lens.shape[0]
    if query_start_loc.shape[0] != num_reqs + 1:
        raise ValueError(
            f"{op}: query_start_loc has {query_start_loc.shape[0]} entries, expected "
            f"num_reqs + 1 = {num_reqs + 1}"
        )
    if block_table.shape[0] < num_reqs:
        raise ValueError(
            f"{op}: block_table has {block_table.shape[0]} rows for {num_reqs} requests"
        )


@dataclass(frozen=True)
class AttentionLayout:
    """What is fixed for every layer of one KV-cache group: the shape class of a step."""

    num_heads: int
    num_kv_heads: int
    head_size: int
    dtype: torch.dtype
    block_size: int


def check_layer_cache(op: str, kv_cache: torch.Tensor, layout: AttentionLayout) -> None:
    """A layer's cache ``[num_blocks, Hkv, block_size, 2 * D]`` as ``layout`` describes it."""
    check_dim(op, "kv_cache", kv_cache, 4, "[num_blocks, num_kv_heads, block_size, 2 * head_size]")
    expected = (layout.num_kv_heads, layout.block_size, 2 * layout.head_size)
    if tuple(kv_cache.shape[1:]) != expected:
        raise ValueError(
            f"{op}: kv_cache has shape {tuple(kv_cache.shape)}; expected "
            f"[num_blocks, {expected[0]}, {expected[1]}, {expected[2]}] for this layer"
        )
    check_dtype(op, "kv_cache", kv_cache, (layout.dtype,))
    if not kv_cache.is_contiguous():
        raise ValueError(f"{op}: kv_cache must be contiguous, got strides {kv_cache.stride()}")


def check_layer_inputs(
    op: str,
    query: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    output: torch.Tensor,
    layout: AttentionLayout,
) -> None:
    """A layer's ``query``/``output`` ``[T, Hq, D]`` and ``key``/``value`` ``[T, Hkv, D]``.

    Rows may be strided (vLLM passes views of the QKV projection); the last
    dimension must be contiguous. ``key``/``value`` may be None (not read here).
    """
    for name, t, heads in (
        ("query", query, layout.num_heads),
        ("output", output, layout.num_heads),
        ("key", key, layout.num_kv_heads),
        ("value", value, layout.num_kv_heads),
    ):
        if t is None:
            continue
        check_dim(op, name, t, 3, f"[num_tokens, {heads}, {layout.head_size}]")
        if tuple(t.shape[1:]) != (heads, layout.head_size):
            raise ValueError(
                f"{op}: {name} has shape {tuple(t.shape)}; expected "
                f"[num_tokens, {heads}, {layout.head_size}] for this layer"
            )
        check_dtype(op, name, t, (layout.dtype,))
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(
                f"{op}: {name} needs a contiguous last dimension, got strides {t.stride()}"
            )
    if output.shape[0] < query.shape[0]:
        raise ValueError(
            f"{op}: output has {output.shape[0]} rows for {query.shape[0]} query tokens"
        )

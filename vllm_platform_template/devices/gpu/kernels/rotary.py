"""Rotary position embedding, in place, optionally fused with the paged KV-cache write.

For token ``t`` at position ``p = positions[t]`` and each head of ``query`` and
``key``, the first ``rotary_dim = cos_sin_cache.shape[-1]`` channels rotate by
``cos = cos_sin_cache[p, :rotary_dim // 2]`` and ``sin = cos_sin_cache[p, rotary_dim // 2:]``::

    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin

with ``(x1, x2)`` the two halves of the rotary channels (NeoX style) or the
even/odd channels (GPT-J style); channels past ``rotary_dim`` are untouched
(``reference_kernels/reference.py::rotary_embedding`` is the readable definition). The
cache values are cast to the query dtype first, as the reference does; the
arithmetic is float32 with one rounding.

``rotary_embedding_and_cache_`` also stores the rotated key and the value of
each token into a paged cache ``[num_blocks, num_kv_heads, block_size, head_size]``
at ``slot_mapping[t] = block * block_size + offset`` (slots outside the cache,
e.g. -1 for padding, are skipped), saving the separate cache-write pass.

One program handles one token and a chunk of heads. A position outside
``[0, cos_sin_cache.shape[0])`` is not checked on the host (that would need a
device sync): the kernel reads no memory for it and rotates by cos = sin = 0.

vLLM hooks served: the ``RotaryEmbedding`` CustomOp (through ``device.py``'s
kernel table) and the fused model's rotary + KV write (``attention_kernels.py``).
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on the device,
``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import (
    check_dtype,
    check_last_dim_contiguous,
    check_launch_device,
    next_power_of_2,
)
from vllm_platform_template.reference_kernels.paged_attention.contract import check_slot_mapping

__all__ = ["rotary_embedding_", "rotary_embedding_and_cache_"]

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int32, torch.int64)

MAX_TILE_ELEMENTS = 4096
"""Upper bound on heads x rotary-half elements rotated by one program."""


@triton.jit
def _rotate_heads(
    base,
    head_stride,
    num_heads,
    head0,
    off1,
    off2,
    rot_mask,
    cos,
    sin,
    BLOCK_H: tl.constexpr,
):
    """Rotate heads ``[head0, head0 + BLOCK_H)`` at ``base`` in place; returns (o1, o2, mask)."""
    heads = head0 + tl.arange(0, BLOCK_H)
    mask = (heads < num_heads)[:, None] & rot_mask[None, :]
    ptrs = base + heads[:, None].to(tl.int64) * head_stride
    x1 = tl.load(ptrs + off1[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(ptrs + off2[None, :], mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos[None, :] - x2 * sin[None, :]
    o2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(ptrs + off1[None, :], o1.to(base.dtype.element_ty), mask=mask)
    tl.store(ptrs + off2[None, :], o2.to(base.dtype.element_ty), mask=mask)
    return o1, o2, mask


@triton.jit
def _rotary_kernel(
    pos_ptr,
    q_ptr,
    q_tok_stride,
    q_head_stride,
    k_ptr,
    k_tok_stride,
    k_head_stride,
    cs_ptr,
    cs_stride,
    max_pos,
    num_q_heads,
    num_kv_heads,
    rot_half,
    head_size,
    v_ptr,
    v_tok_stride,
    v_head_stride,
    kc_ptr,
    vc_ptr,
    kc_block_stride,
    kc_head_stride,
    kc_tok_stride,
    vc_block_stride,
    vc_head_stride,
    vc_tok_stride,
    slot_ptr,
    num_writes,
    block_size,
    num_slots,
    IS_NEOX: tl.constexpr,
    HAS_KEY: tl.constexpr,
    WRITE_CACHE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    head0 = tl.program_id(1) * BLOCK_H
    i = tl.arange(0, BLOCK_R)
    rot_mask = i < rot_half
    # Scalars are broadcast to blocks before they meet a mask: Triton 3.9's
    # interpreter mis-types `block_mask & scalar_condition`.
    pos = tl.load(pos_ptr + tok + 0 * i).to(tl.int64)
    cs_mask = rot_mask & (pos >= 0) & (pos < max_pos)
    cs_row = cs_ptr + pos * cs_stride
    # Cast the cache to the query dtype first (as the reference), then compute in fp32.
    q_dtype = q_ptr.dtype.element_ty
    cos = tl.load(cs_row + i, mask=cs_mask, other=0.0).to(q_dtype).to(tl.float32)
    sin = tl.load(cs_row + rot_half + i, mask=cs_mask, other=0.0).to(q_dtype).to(tl.float32)
    if IS_NEOX:
        off1 = i
        off2 = i + rot_half
    else:
        off1 = 2 * i
        off2 = 2 * i + 1

    # Heads past num_q_heads / num_kv_heads in the last chunk are masked off.
    _rotate_heads(
        q_ptr + tok * q_tok_stride,
        q_head_stride,
        num_q_heads,
        head0,
        off1,
        off2,
        rot_mask,
        cos,
        sin,
        BLOCK_H,
    )
    if HAS_KEY:
        k_base = k_ptr + tok * k_tok_stride
        o1, o2, rot_store_mask = _rotate_heads(
            k_base,
            k_head_stride,
            num_kv_heads,
            head0,
            off1,
            off2,
            rot_mask,
            cos,
            sin,
            BLOCK_H,
        )
        if WRITE_CACHE:
            heads = head0 + tl.arange(0, BLOCK_H)
            # One slot per written token (tokens from num_writes on are padding).
            writes = (tok + 0 * heads) < num_writes
            slot = tl.load(slot_ptr + tok + 0 * heads, mask=writes, other=-1).to(tl.int64)
            head_ok = (heads < num_kv_heads) & (slot >= 0) & (slot < num_slots)
            slot = tl.where(head_ok, slot, 0)
            blk = slot // block_size
            off = slot % block_size
            heads = heads.to(tl.int64)
            kc = (
                kc_ptr
                + (blk * kc_block_stride + off * kc_tok_stride + heads * kc_head_stride)[:, None]
            )
            kc_dtype = kc_ptr.dtype.element_ty
            rot_store_mask = rot_store_mask & head_ok[:, None]
            tl.store(kc + off1[None, :], o1.to(kc_dtype), mask=rot_store_mask)
            tl.store(kc + off2[None, :], o2.to(kc_dtype), mask=rot_store_mask)
            # Channels past rotary_dim go to the cache unchanged, and so does V.
            d = tl.arange(0, BLOCK_D)
            pass_mask = head_ok[:, None] & ((d >= 2 * rot_half) & (d < head_size))[None, :]
            k_heads = k_base + heads[:, None] * k_head_stride
            k_pass = tl.load(k_heads + d[None, :], mask=pass_mask, other=0.0)
            tl.store(kc + d[None, :], k_pass.to(kc_dtype), mask=pass_mask)
            v_mask = head_ok[:, None] & (d < head_size)[None, :]
            v_heads = v_ptr + tok * v_tok_stride + heads[:, None] * v_head_stride
            v = tl.load(v_heads + d[None, :], mask=v_mask, other=0.0)
            vc = (
                vc_ptr
                + (blk * vc_block_stride + off * vc_tok_stride + heads * vc_head_stride)[:, None]
            )
            tl.store(vc + d[None, :], v.to(vc_ptr.dtype.element_ty), mask=v_mask)


def _heads_view(op: str, name: str, t: torch.Tensor, num_tokens: int, head_size: int):
    """``t`` as a ``[num_tokens, heads, head_size]`` view sharing its storage."""
    check_dtype(op, name, t, FLOAT_DTYPES)
    check_last_dim_contiguous(op, name, t)
    if t.dim() < 2 or t.shape[0] != num_tokens or math.prod(t.shape[1:]) % head_size != 0:
        raise ValueError(
            f"{op}: {name} has shape {tuple(t.shape)}; expected [num_tokens={num_tokens}, "
            f"num_heads * head_size] or [num_tokens, num_heads, head_size={head_size}]"
        )
    try:
        return t.view(num_tokens, math.prod(t.shape[1:]) // head_size, head_size)
    except RuntimeError:
        raise ValueError(
            f"{op}: {name} (strides {tuple(t.stride())}) cannot be viewed as [num_tokens, "
            f"num_heads, {head_size}] without a copy; it is updated in place, so pass a "
            "tensor whose heads are contiguous within each token"
        ) from None


def _check_rotary_args(
    op: str,
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    check_dtype(op, "positions", positions, INDEX_DTYPES)
    num_tokens = positions.numel()
    if head_size <= 0:
        raise ValueError(f"{op}: head_size must be positive, got {head_size}")
    if cos_sin_cache.dim() != 2:
        raise ValueError(
            f"{op}: cos_sin_cache must be [max_position, rotary_dim], "
            f"got shape {tuple(cos_sin_cache.shape)}"
        )
    check_dtype(op, "cos_sin_cache", cos_sin_cache, FLOAT_DTYPES)
    check_last_dim_contiguous(op, "cos_sin_cache", cos_sin_cache)
    rotary_dim = cos_sin_cache.shape[1]
    if rotary_dim % 2 != 0 or not 0 < rotary_dim <= head_size:
        raise ValueError(
            f"{op}: rotary_dim (cos_sin_cache.shape[1] = {rotary_dim}) must be even and "
            f"in [2, head_size = {head_size}]"
        )
    q3 = _heads_view(op, "query", query, num_tokens, head_size)
    k3 = None
    if key is not None:
        if key.dtype != query.dtype:
            raise ValueError(f"{op}: key dtype {key.dtype} differs from query dtype {query.dtype}")
        k3 = _heads_view(op, "key", key, num_tokens, head_size)
    return q3, k3, rotary_dim


def _launch(
    positions: torch.Tensor,
    q3: torch.Tensor,
    k3: torch.Tensor | None,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
    cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> None:
    num_tokens, num_q_heads, head_size = q3.shape
    num_kv_heads = k3.shape[1] if k3 is not None else 0
    rot_half = cos_sin_cache.shape[1] // 2
    if num_tokens == 0:
        return
    block_r = next_power_of_2(rot_half)
    block_h = min(
        next_power_of_2(max(num_q_heads, num_kv_heads)), max(1, MAX_TILE_ELEMENTS // block_r)
    )
    grid = (num_tokens, triton.cdiv(max(num_q_heads, num_kv_heads), block_h))
    pos = positions.reshape(-1).contiguous()
    k = k3 if k3 is not None else q3
    if cache is not None:
        v3, key_cache, value_cache, slots = cache
        kc_strides, vc_strides = key_cache.stride()[:3], value_cache.stride()[:3]
        block_size, num_slots = key_cache.shape[2], key_cache.shape[0] * key_cache.shape[2]
        num_writes = slots.shape[0]
    else:  # never dereferenced: WRITE_CACHE is off
        v3, key_cache, value_cache, slots = q3, q3, q3, pos
        kc_strides = vc_strides = (0, 0, 0)
        block_size, num_slots, num_writes = 1, 0, 0
    _rotary_kernel[grid](
        pos,
        q3,
        q3.stride(0),
        q3.stride(1),
        k,
        k.stride(0),
        k.stride(1),
        cos_sin_cache,
        cos_sin_cache.stride(0),
        cos_sin_cache.shape[0],
        num_q_heads,
        num_kv_heads,
        rot_half,
        head_size,
        v3,
        v3.stride(0),
        v3.stride(1),
        key_cache,
        value_cache,
        *kc_strides,
        *vc_strides,
        slots,
        num_writes,
        block_size,
        num_slots,
        IS_NEOX=bool(is_neox_style),
        HAS_KEY=k3 is not None,
        WRITE_CACHE=cache is not None,
        BLOCK_H=block_h,
        BLOCK_R=block_r,
        BLOCK_D=next_power_of_2(head_size),
        num_warps=4 if block_h * block_r <= 1024 else 8,
    )


def rotary_embedding_(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rotate ``query`` (and ``key``) in place; returns them.

    ``positions``: ``[num_tokens]`` int32/int64. ``query``: ``[num_tokens, num_heads *
    head_size]`` (or ``[num_tokens, num_heads, head_size]``), rows may be strided.
    ``key``: likewise with ``num_kv_heads``, or None. ``cos_sin_cache``:
    ``[max_position, rotary_dim]``, cos in the first half, sin in the second.
    """
    op = "rotary_embedding_"
    q3, k3, _ = _check_rotary_args(op, positions, query, key, head_size, cos_sin_cache)
    check_launch_device(_rotary_kernel, op, positions, query, key, cos_sin_cache)
    _launch(positions, q3, k3, cos_sin_cache, is_neox_style)
    return query, key


def rotary_embedding_and_cache_(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``query``/``key`` in place and write rotated key and value to the paged cache.

    ``value``: shaped like ``key``. ``key_cache``/``value_cache``:
    ``[num_blocks, num_kv_heads, block_size, head_size]`` ("plain" layout, token
    ``t`` of a block at row ``t``; strided views such as the halves of the
    plugin's per-layer cache are fine), same dtype as ``key``. ``slot_mapping``:
    the KV-write contract of every path (``check_slot_mapping``: contiguous
    int64, one slot per token written, ``<= num_tokens``; every token is
    rotated, tokens past ``len(slot_mapping)`` are not written); slots outside
    the cache (-1) are skipped.
    Returns ``(query, key)``.
    """
    op = "rotary_embedding_and_cache_"
    q3, k3, _ = _check_rotary_args(op, positions, query, key, head_size, cos_sin_cache)
    assert k3 is not None
    num_tokens, num_kv_heads = k3.shape[0], k3.shape[1]
    v3 = _heads_view(op, "value", value, num_tokens, head_size)
    if v3.shape != k3.shape or value.dtype != key.dtype:
        raise ValueError(
            f"{op}: value must match key in shape and dtype; key is {tuple(k3.shape)} "
            f"{key.dtype}, value is {tuple(v3.shape)} {value.dtype}"
        )
    expected = (num_kv_heads, head_size)
    for name, cache in (("key_cache", key_cache), ("value_cache", value_cache)):
        if cache.dim() != 4 or tuple(cache.shape[1:2]) + tuple(cache.shape[3:]) != expected:
            raise ValueError(
                f"{op}: {name} has shape {tuple(cache.shape)}; expected [num_blocks, "
                f"{num_kv_heads}, block_size, {head_size}]"
            )
        if cache.dtype != key.dtype:
            raise ValueError(f"{op}: {name} dtype {cache.dtype} differs from key dtype {key.dtype}")
        check_last_dim_contiguous(op, name, cache)
    if key_cache.shape != value_cache.shape:
        raise ValueError(
            f"{op}: key_cache {tuple(key_cache.shape)} and value_cache "
            f"{tuple(value_cache.shape)} differ in shape"
        )
    check_slot_mapping(op, slot_mapping, num_tokens)
    check_launch_device(
        _rotary_kernel,
        op,
        positions,
        query,
        key,
        value,
        cos_sin_cache,
        key_cache,
        value_cache,
        slot_mapping,
    )
    _launch(
        positions,
        q3,
        k3,
        cos_sin_cache,
        is_neox_style,
        cache=(v3, key_cache, value_cache, slot_mapping),
    )
    return query, key

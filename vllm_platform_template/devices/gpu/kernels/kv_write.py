"""The KV-cache write: ``key``/``value`` rows into their slots of the paged caches.

It writes the contract's layout, plain interior
(``reference_kernels/paged_attention/contract.py``); slots outside the cache (-1
for padding) are skipped. One program per token and block of KV heads;
:func:`write_kv_unchecked` launches it through ``launch.Launch``, the public
:func:`reshape_and_cache_` checks its arguments first.

vLLM hook served: the KV write of ``TEMPLATE_ATTN`` (``attention_kernels.py``).
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on
the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from vllm_platform_template.devices.gpu.kernels import (
    check_last_dim_contiguous,
    check_launch_device,
    next_power_of_2,
)
from vllm_platform_template.devices.gpu.kernels.launch import Launch
from vllm_platform_template.reference_kernels.paged_attention.contract import check_kv_write

__all__ = ["reshape_and_cache_", "write_kv_unchecked"]


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

"""The Llama fused ops, dispatching per device inside the op (the RFC's call-site shape).

Each op has one entry point the model calls; inside, it takes the kernel from
the device's kernel table (``device.kernel_table``: the same kernels the IR
providers and the CustomOps call), and the torch reference on a device without
one. The KV-cache write goes through the attention kernels that read the cache.

- :func:`add_rms_norm_` - residual add + RMSNorm, in place (one pass).
- :func:`silu_and_mul` - SiLU of the gate half times the up half.
- :func:`rope_and_cache_` - rotary embedding of ``q``/``k`` + the KV-cache
  write of the rotated key and the value: one kernel where the attention
  kernels offer it (``rope_and_write_kv``: Triton), else the device's rotary
  kernel followed by the attention kernels' write (vLLM's CPU build has no
  single fused kernel for it).
"""

from __future__ import annotations

import torch

from vllm_platform_template.device import AttentionKernels, kernel_table
from vllm_platform_template.models.llama.ops import reference
from vllm_platform_template.reference_kernels import reference as kernel_reference
from vllm_platform_template.reference_kernels.paged_attention import (
    reference as attention_reference,
)
from vllm_platform_template.reference_kernels.paged_attention.contract import check_kv_write


def add_rms_norm_(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: ``residual += x``; ``x = rms_norm(residual) * weight``. Returns (x, residual)."""
    table = kernel_table(x.device.type)
    if table is not None and table.fused_add_rms_norm_supports(x, residual, weight, epsilon):
        out, summed = table.fused_add_rms_norm(x, residual, weight, epsilon)
    else:
        out, summed = reference.add_rms_norm(x, residual, weight, epsilon)
    if out is not x:  # an out-of-place kernel, or the reference
        x.copy_(out)
        residual.copy_(summed)
    return x, residual


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate_up[..., :d]) * gate_up[..., d:]``."""
    table = kernel_table(gate_up.device.type)
    if table is not None and table.silu_and_mul is not None:
        return table.silu_and_mul(gate_up)
    return reference.silu_and_mul(gate_up)


def rope_and_cache_(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    attention: AttentionKernels,
) -> None:
    """Rotate ``query``/``key`` in place and write key/value into ``kv_cache``.

    ``attention``: the kernels that read this cache (its layout); the write
    keeps the KV-write contract of every path (``slot_mapping``: one int64 slot
    per token written, ``-1`` skips).
    """
    key_cache, value_cache = attention_reference.split_kv_cache(kv_cache)
    fused = attention.rope_and_write_kv
    if fused is not None:
        fused(
            positions,
            query,
            key,
            value,
            head_size,
            cos_sin_cache,
            is_neox_style,
            key_cache,
            value_cache,
            slot_mapping,
        )
        return
    table = kernel_table(query.device.type)
    if table is not None and table.rotary_embedding_ is not None and table.rotary_ready():
        table.rotary_embedding_(positions, query, key, head_size, cos_sin_cache, is_neox_style)
    else:
        q, k = kernel_reference.rotary_embedding(
            positions, query, key, head_size, cos_sin_cache, is_neox_style
        )
        assert k is not None
        query.copy_(q)
        key.copy_(k)
    num_kv_heads = key_cache.shape[1]
    key_rows = key.view(-1, num_kv_heads, head_size)
    value_rows = value.view(-1, num_kv_heads, head_size)
    # The attention kernels' write launches unchecked: the contract is checked here.
    check_kv_write("rope_and_cache_", key_rows, value_rows, key_cache, value_cache, slot_mapping)
    attention.write_kv(key_rows, value_rows, key_cache, value_cache, slot_mapping)

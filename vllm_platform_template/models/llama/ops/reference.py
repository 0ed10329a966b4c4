"""Torch references of the Llama fused ops: the semantics the kernels are tested against."""

from __future__ import annotations

import torch

from vllm_platform_template.reference_kernels import reference as kernel_reference
from vllm_platform_template.reference_kernels.paged_attention import (
    reference as attention_reference,
)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``residual' = x + residual``; ``out = rms_norm(residual') * weight`` (fp32 math)."""
    summed = x.float() + residual.float()
    normed = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + epsilon)
    return (normed.to(weight.dtype) * weight).to(x.dtype), summed.to(x.dtype)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    return kernel_reference.silu_and_mul(gate_up)


def rope_and_cache(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``query``/``key``; write the rotated key and ``value`` into the paged cache
    (plain layout). Returns the rotated query and key."""
    q, k = kernel_reference.rotary_embedding(
        positions, query, key, head_size, cos_sin_cache, is_neox_style
    )
    assert k is not None
    key_cache, value_cache = attention_reference.split_kv_cache(kv_cache)
    num_kv_heads = key_cache.shape[1]
    attention_reference.reshape_and_cache_(
        k.view(-1, num_kv_heads, head_size),
        value.reshape(-1, num_kv_heads, head_size),
        key_cache,
        value_cache,
        slot_mapping,
    )
    return q, k

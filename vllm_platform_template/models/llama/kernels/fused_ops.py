"""The Llama fused ops, dispatching per device inside the op (the RFC's call-site shape).

Each op has one entry point the model calls; inside, it picks the kernel for
the tensors' device: vLLM's C++ kernels on the CPU reference backend, the
plugin's Triton kernels on CUDA, the torch reference elsewhere. A vendor adds
its device as one more branch.

- :func:`add_rms_norm_` - residual add + RMSNorm, in place (one pass).
- :func:`silu_and_mul` - SiLU of the gate half times the up half.
- :func:`rope_and_cache_` - rotary embedding of ``q``/``k`` + the KV-cache
  write of the rotated key and the value. On CUDA one Triton kernel does both;
  on the CPU it is vLLM's rotary kernel followed by the cache write of the
  attention path in use (vLLM's CPU build has no single fused kernel for it).
"""

from __future__ import annotations

import torch

from vllm_platform_template.kernels import cpu as cpu_kernels
from vllm_platform_template.kernels.paged_attention import cpu as cpu_attention
from vllm_platform_template.kernels.paged_attention import reference as attention_reference
from vllm_platform_template.models.llama.kernels import reference

CPU_KERNELS = "cpu_kernels"
TRITON = "triton"


def add_rms_norm_(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: ``residual += x``; ``x = rms_norm(residual) * weight``. Returns (x, residual)."""
    if x.is_cuda:
        from vllm_platform_template.kernels.triton.layernorm import fused_add_rms_norm_

        return fused_add_rms_norm_(x, residual, weight, epsilon)
    if x.device.type == "cpu":
        return cpu_kernels.fused_add_rms_norm_(x, residual, weight, epsilon)
    out, summed = reference.add_rms_norm(x, residual, weight, epsilon)
    x.copy_(out)
    residual.copy_(summed)
    return x, residual


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate_up[..., :d]) * gate_up[..., d:]``."""
    if gate_up.is_cuda:
        from vllm_platform_template.kernels.triton.activation import silu_and_mul as triton_silu

        return triton_silu(gate_up)
    if gate_up.device.type == "cpu":
        return cpu_kernels.silu_and_mul(gate_up)
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
    cache_path: str,
) -> None:
    """Rotate ``query``/``key`` in place and write key/value into ``kv_cache``.

    ``cache_path`` is the attention path that reads this cache (its layout):
    ``cpu_kernels`` (vLLM's CPU attention layout), ``triton`` or ``reference``
    (the plain layout).
    """
    key_cache, value_cache = attention_reference.split_kv_cache(kv_cache)
    num_kv_heads = key_cache.shape[1]
    num_tokens = slot_mapping.shape[0]
    if cache_path == TRITON:
        from vllm_platform_template.kernels.triton.rotary import rotary_embedding_and_cache_

        rotary_embedding_and_cache_(
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
    if cache_path == CPU_KERNELS and cpu_kernels.vllm_cpu_op("rotary_embedding") is not None:
        cpu_kernels.rotary_embedding_(
            positions, query, key, head_size, cos_sin_cache, is_neox_style
        )
        isa = cpu_attention.isa_for(kv_cache.dtype, kv_cache.shape[2], head_size)
        cpu_attention.reshape_and_cache_(
            key[:num_tokens].view(-1, num_kv_heads, head_size),
            value[:num_tokens].view(-1, num_kv_heads, head_size),
            key_cache,
            value_cache,
            slot_mapping,
            isa,
        )
        return
    if cache_path == CPU_KERNELS:
        raise RuntimeError("the cpu_kernels cache path needs vLLM's CPU kernels loaded")
    q, k = reference.rope_and_cache(
        positions,
        query,
        key,
        value,
        head_size,
        cos_sin_cache,
        is_neox_style,
        kv_cache,
        slot_mapping,
    )
    query.copy_(q)
    key.copy_(k)

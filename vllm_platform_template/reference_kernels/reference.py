"""Reference semantics of the template's ops in plain torch.

Each function is the readable definition the device kernels are tested
against. ``native_*`` repeat vLLM IR's native implementations
(``vllm/ir/ops``) verbatim so that the kernel tests and device benchmarks run
without vLLM; the conformance kit checks the providers against ``vllm.ir``
itself, which keeps these copies honest.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` with ``d = x.shape[-1] // 2`` (vLLM's SiluAndMul)."""
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rotary position embedding as vLLM's ``RotaryEmbedding.forward_static``.

    ``query``/``key`` are ``[num_tokens, num_heads * head_size]``; the first
    ``rotary_dim = cos_sin_cache.shape[-1]`` channels of each head rotate.
    Returns new tensors (inputs untouched).
    """
    rotary_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache.index_select(0, positions.flatten()).chunk(2, dim=-1)

    def rotate(x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(positions.numel(), -1, head_size)
        rot, passthrough = x[..., :rotary_dim], x[..., rotary_dim:]
        c = cos.unsqueeze(-2).to(x.dtype)
        s = sin.unsqueeze(-2).to(x.dtype)
        if is_neox_style:
            x1, x2 = torch.chunk(rot, 2, dim=-1)
        else:
            x1, x2 = rot[..., ::2], rot[..., 1::2]
        o1 = x1 * c - x2 * s
        o2 = x2 * c + x1 * s
        if is_neox_style:
            out = torch.cat((o1, o2), dim=-1)
        else:
            out = torch.stack((o1, o2), dim=-1).flatten(-2)
        return torch.cat((out, passthrough), dim=-1).reshape(shape)

    return rotate(query), rotate(key) if key is not None else None


def native_rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None, epsilon: float, variance_size: int | None = None
) -> torch.Tensor:
    """vLLM IR ``rms_norm`` (native)."""
    orig_dtype = x.dtype
    x = x.to(torch.float32)
    x_var = x if variance_size is None else x[..., :variance_size]
    variance = x_var.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + epsilon)
    if weight is not None:
        x = x.to(weight.dtype) * weight
    return x.to(orig_dtype)


def native_fused_add_rms_norm(
    x: torch.Tensor,
    x_residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM IR ``fused_add_rms_norm`` (native)."""
    orig_dtype = x.dtype
    x = x.to(torch.float32)
    x = x + x_residual.to(torch.float32)
    x_residual = x.to(orig_dtype)
    x_var = x if variance_size is None else x[..., :variance_size]
    variance = x_var.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + epsilon)
    if weight is not None:
        x = x.to(weight.dtype) * weight
    return x.to(orig_dtype), x_residual


def native_gelu_and_mul_sparse(
    x: torch.Tensor, std_multiplier: float, approximate: str = "none"
) -> torch.Tensor:
    """vLLM IR ``gelu_and_mul_sparse`` (native)."""
    d = x.shape[-1] // 2
    gate = x[..., :d]
    mean = torch.mean(gate, dim=-1, keepdim=True)
    std = torch.std(gate, dim=-1, keepdim=True, unbiased=False)
    sparse_gate = F.relu(gate - (mean + std * std_multiplier))
    return F.gelu(sparse_gate, approximate=approximate) * x[..., d:]

"""Reference semantics of the template's ops in plain torch.

Each function is the readable definition the device kernels are tested
against. vLLM IR ops already carry their native semantics in ``vllm.ir``;
these are for the plugin's own ops (fused activation, rotary embedding).
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

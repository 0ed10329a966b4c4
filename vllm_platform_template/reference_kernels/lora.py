"""LoRA's punica operators in plain torch, skipping the tokens that use no adapter.

The semantics of vLLM's punica ops (``vllm/lora/ops/torch_ops``, its Triton kernels):
per token ``t`` with adapter slot ``i = indices[t]``,

- ``shrink``: ``out[t] = scale * x[t] @ A[i]^T`` (``A``: ``[slots, 1, rank, in]``);
- ``expand``: ``out[t, offset:offset + size] (+)= x[t] @ B[i]^T`` (``B``: ``[slots, 1,
  size, rank]``);

and ``i == -1`` means "no adapter": the token's output is left as it is (shrink writes
zeros, as the Triton kernel's output buffer holds). vLLM 0.32's torch ops gather
``weights[indices]`` and so give a ``-1`` token the **last** slot's adapter: a request
without LoRA batched beside LoRA requests gets an adapter's delta (vllm-project/vllm
PRs #48421 and #49656, open). Here the ``-1`` rows are masked out before the gather.

Prefill (vLLM's ``sgmv``) is the same per token, each sequence's slot repeated over its
tokens. No vLLM import: the punica wrapper (``lora/punica.py``) calls these.
"""

from __future__ import annotations

import torch

__all__ = ["expand", "shrink"]


def _rows(
    weights: torch.Tensor, indices: torch.Tensor, tokens: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens that use an adapter (one index serves every token, as in vLLM's ops),
    and their adapters' matrices ``[n, out, in]``."""
    indices = indices.expand(tokens) if indices.numel() == 1 else indices[:tokens]
    used = (indices >= 0).nonzero().flatten()
    selected = weights[indices[used]]
    if selected.dim() == 4:
        selected = selected.squeeze(1)
    return used, selected


def shrink(
    x: torch.Tensor,
    lora_a: torch.Tensor,
    out: torch.Tensor,
    indices: torch.Tensor,
    scale: float,
) -> None:
    """``out[t] = scale * x[t] @ A[indices[t]]^T``; zeros where ``indices[t] == -1``."""
    used, selected = _rows(lora_a, indices, out.shape[0])
    out[:, : lora_a.shape[-2]] = 0
    if used.numel() == 0:
        return
    product = torch.einsum("bi,boi->bo", x[used].to(out.dtype), selected.to(out.dtype))
    out[used, : product.shape[1]] = scale * product


def expand(
    x: torch.Tensor,
    lora_b: torch.Tensor,
    out: torch.Tensor,
    indices: torch.Tensor,
    offset: int = 0,
    size: int | None = None,
    add: bool = True,
) -> None:
    """``out[t, offset:offset + size] (+)= x[t] @ B[indices[t]]^T``; tokens with index -1
    keep their row."""
    used, selected = _rows(lora_b, indices, out.shape[0])
    if used.numel() == 0:
        return
    product = torch.einsum("bi,boi->bo", x[used].to(out.dtype), selected.to(out.dtype))
    width = product.shape[1] if size is None else size
    width = min(width, out.shape[1] - offset, product.shape[1])
    columns = slice(offset, offset + width)
    if add:
        out[used, columns] += product[:, :width]
    else:
        out[used, columns] = product[:, :width]

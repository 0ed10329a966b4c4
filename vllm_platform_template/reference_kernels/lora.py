"""LoRA's punica operators in plain torch, skipping the tokens that use no adapter.

The semantics of vLLM's punica ops (``vllm/lora/ops/torch_ops`` and its compiled kernels):
per token ``t`` with adapter slot ``i = indices[t]``,

- ``shrink``: ``out[t] = scale * x[t] @ A[i]^T`` (``A``: ``[slots, 1, rank, in]``);
- ``expand``: ``out[t, offset:offset + size] (+)= x[t] @ B[i]^T`` (``B``: ``[slots, 1,
  size, rank]``);

and ``i == -1`` means "no adapter": the token's output is left as it is (shrink writes
zeros: vLLM's compiled kernels skip such rows of their zeroed buffer). vLLM 0.32's torch
ops gather ``weights[indices]`` and so give a ``-1`` token the **last** slot's adapter:
a request without LoRA batched beside LoRA requests gets an adapter's delta
(vllm-project/vllm PRs #48421 and #49656, open). Here every token's product is computed
(a ``-1`` token reads slot 0) and the ``-1`` rows are masked out of the result: no
operator whose output size depends on the indices' values, so a device graph can record
these operators and replay them with another batch's indices.

Prefill (vLLM's ``sgmv``) is the same per token, each sequence's slot repeated over its
tokens. No vLLM import: the punica wrapper (``lora/punica.py``) calls these.
"""

from __future__ import annotations

import torch

__all__ = ["expand", "shrink"]


def _adapters(
    weights: torch.Tensor, indices: torch.Tensor, tokens: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which tokens use an adapter (``[tokens, 1]``; one index serves every token, as in
    vLLM's ops) and each token's adapter matrix ``[tokens, out, in]`` (slot 0 for ``-1``)."""
    indices = indices.expand(tokens) if indices.numel() == 1 else indices[:tokens]
    selected = weights[indices.clamp(min=0)]
    if selected.dim() == 4:
        selected = selected.squeeze(1)
    return (indices >= 0).unsqueeze(1), selected


def _product(x: torch.Tensor, selected: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.einsum("bi,boi->bo", x[: selected.shape[0]].to(dtype), selected.to(dtype))


def shrink(
    x: torch.Tensor,
    lora_a: torch.Tensor,
    out: torch.Tensor,
    indices: torch.Tensor,
    scale: float,
) -> None:
    """``out[t] = scale * x[t] @ A[indices[t]]^T``; zeros where ``indices[t] == -1``."""
    used, selected = _adapters(lora_a, indices, out.shape[0])
    product = _product(x, selected, out.dtype)
    out[:, : product.shape[1]] = torch.where(used, scale * product, 0)


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
    used, selected = _adapters(lora_b, indices, out.shape[0])
    product = _product(x, selected, out.dtype)
    width = product.shape[1] if size is None else size
    width = min(width, out.shape[1] - offset, product.shape[1])
    columns = out[:, offset : offset + width]
    if add:
        columns += torch.where(used, product[:, :width], 0)
    else:
        columns.copy_(torch.where(used, product[:, :width], columns))

"""Reference semantics of the W8A8 INT8 linear op in plain torch.

The op vLLM's compressed-tensors W8A8 scheme runs for a linear layer with per-channel
int8 weights and dynamic per-token activations (vLLM's ``scaled_int8_quant`` then its
scaled-mm kernels): quantize each row of ``x`` symmetrically to int8 with its own scale,
multiply in integers, then scale by the row's and the output channel's scales. Device
kernels are tested against these functions (the conformance kit).
"""

from __future__ import annotations

import torch

INT8_MAX = 127


def per_token_quant_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)``: ``x`` (``[M, K]``) as int8 with one fp32 scale per row,
    ``x ~= q * scale``; ``scale = max|row| / 127``, ``q = round(row / scale)`` (to
    nearest even, as vLLM's kernels). A row of zeros gets scale 0 and q 0."""
    xf = x.float()
    scale = xf.abs().amax(dim=-1, keepdim=True) / INT8_MAX
    inverse = torch.where(scale > 0, 1.0 / scale, torch.zeros_like(scale))
    q = torch.round(xf * inverse).clamp(-INT8_MAX - 1, INT8_MAX).to(torch.int8)
    return q, scale


def w8a8_int8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x @ (weight * weight_scale) + bias`` with ``x`` quantized per token to int8.

    ``x``: ``[M, K]`` float; ``weight``: ``[N, K]`` int8 (the checkpoint's layout);
    ``weight_scale``: ``[N]`` fp32;
    ``bias``: ``[N]`` or None. Returns ``[M, N]`` in ``x``'s dtype. The integer
    products are summed exactly (int32 accumulation, as every int8 GEMM does).
    """
    q, x_scale = per_token_quant_int8(x)
    accumulated = (q.to(torch.int32) @ weight.to(torch.int32).t()).float()
    out = accumulated * x_scale * weight_scale.float().view(1, -1)
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)

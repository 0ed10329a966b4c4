"""Reference semantics of the mixture-of-experts ops in plain torch.

What vLLM's ``FusedMoE`` layer computes for a Mixtral-style block (softmax routing,
top-k, optionally renormalised; each expert a SiLU-gated MLP), as one op from the
router logits: the op a platform's monolithic MoE method runs
(``moe/fused_moe_method.py``), with fp experts (:func:`fused_moe`) or W8A8 INT8 ones
(:func:`fused_moe_w8a8_int8`, what vLLM's compressed-tensors INT8 experts compute).
Device kernels are tested against them (``test_fused_moe.py``, the conformance kit).

It is also the experts kernel of devices without a grouped GEMM (the CPU, the
first-light test device): every expert runs on every token and unselected experts
are weighted by exactly zero, so there is no data-dependent shape and no host sync
(a graph may hold it), and the sum over experts runs in expert order, as
transformers' Mixtral adds them (fp32 tokens match it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from vllm_platform_template.reference_kernels.int8_linear import w8a8_int8_linear


def route_topk_softmax(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, ids)`` of each token's ``top_k`` experts: softmax over the experts in
    fp32, the ``top_k`` largest, divided by their sum when ``renormalize``."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def fused_moe(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    """The MoE block's output for ``x`` (``[T, H]``).

    ``router_logits``: ``[T, E]``; ``w13``: ``[E, 2I, H]`` (each expert's gate then up
    projection, vLLM's layout); ``w2``: ``[E, H, I]``. Expert ``e``'s output on a token
    is ``w2[e] @ (silu(g) * u)`` with ``g, u = split(w13[e] @ x)``; the block's output
    is the routing-weighted sum over the token's ``top_k`` experts.
    """

    def expert(e: int) -> torch.Tensor:
        gate, up = F.linear(x, w13[e]).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, w2[e])

    return combine_experts(x, router_logits, w13.shape[0], top_k, renormalize, expert)


def fused_moe_w8a8_int8(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w13_scale: torch.Tensor,
    w2: torch.Tensor,
    w2_scale: torch.Tensor,
    top_k: int,
    renormalize: bool,
    int8_linear: Callable[..., torch.Tensor] = w8a8_int8_linear,
) -> torch.Tensor:
    """:func:`fused_moe` with W8A8 INT8 experts, as vLLM's INT8 MoE kernels compute it.

    ``w13``: ``[E, 2I, H]`` int8, ``w13_scale``: ``[E, 2I]`` fp32; ``w2``: ``[E, H, I]``
    int8, ``w2_scale``: ``[E, H]`` fp32 (per output channel, symmetric). Each expert's
    two projections are W8A8 linear layers (``int8_linear``, default the reference
    ``w8a8_int8_linear``): the token quantized per row to int8 before the first, the
    SiLU-gated product (in ``x``'s dtype) quantized per row again before the second.
    """

    def expert(e: int) -> torch.Tensor:
        gate, up = int8_linear(x, w13[e], w13_scale[e], None).chunk(2, dim=-1)
        return int8_linear(F.silu(gate) * up, w2[e], w2_scale[e], None)

    return combine_experts(x, router_logits, w13.shape[0], top_k, renormalize, expert)


def combine_experts(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    num_experts: int,
    top_k: int,
    renormalize: bool,
    expert: Callable[[int], torch.Tensor],
) -> torch.Tensor:
    """The routing-weighted sum of ``expert(e)`` (expert ``e`` on every token of ``x``)
    over each token's ``top_k`` experts, added in expert order."""
    weights, ids = route_topk_softmax(router_logits, top_k, renormalize)
    # [T, E]: each token's routing weight of every expert (0 where not selected)
    dense = torch.zeros(x.shape[0], num_experts, dtype=torch.float32, device=x.device)
    dense.scatter_(1, ids, weights)
    out = torch.zeros_like(x)
    for e in range(num_experts):
        out = out + expert(e) * dense[:, e : e + 1].to(x.dtype)
    return out

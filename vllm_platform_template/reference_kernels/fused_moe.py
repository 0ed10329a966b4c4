"""Reference semantics of the mixture-of-experts op in plain torch.

What vLLM's ``FusedMoE`` layer computes for a Mixtral-style block (softmax routing,
top-k, optionally renormalised; each expert a SiLU-gated MLP), as one op from the
router logits: the op a platform's monolithic MoE method runs
(``moe/fused_moe_method.py``). Device kernels are tested against it
(``test_fused_moe.py``, the conformance kit).

It is also the experts kernel of devices without a grouped GEMM (the CPU, the
first-light test device): every expert runs on every token and unselected experts
are weighted by exactly zero, so there is no data-dependent shape and no host sync
(a graph may hold it), and the sum over experts runs in expert order, as
transformers' Mixtral adds them (fp32 tokens match it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
    weights, ids = route_topk_softmax(router_logits, top_k, renormalize)
    num_experts = w13.shape[0]
    # [T, E]: each token's routing weight of every expert (0 where not selected)
    dense = torch.zeros(x.shape[0], num_experts, dtype=torch.float32, device=x.device)
    dense.scatter_(1, ids, weights)
    out = torch.zeros_like(x)
    for e in range(num_experts):
        gate, up = F.linear(x, w13[e]).chunk(2, dim=-1)
        expert_out = F.linear(F.silu(gate) * up, w2[e])
        out = out + expert_out * dense[:, e : e + 1].to(x.dtype)
    return out

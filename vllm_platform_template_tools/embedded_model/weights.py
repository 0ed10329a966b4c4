"""Deterministic Llama weights from a fixed seed, for the presets without trained weights.

Only ``small`` uses them (``tiny``'s weights are trained: ``trained.py``).
Weights are drawn on the CPU from ``torch.Generator`` with a fixed seed, so the
same preset gives bit-identical tensors on every machine. Scales are chosen so
that activations stay O(1) through the layers and the output logits are spread
widely (std about 4): greedy decoding then has clear winners, which keeps token
parity between implementations robust to rounding differences.
"""

from __future__ import annotations

import math

import torch

from .presets import ModelPreset

SEED = 20261122
LOGIT_STD = 4.0


def make_state_dict(preset: ModelPreset, seed: int = SEED) -> dict[str, torch.Tensor]:
    """Llama state dict (Hugging Face parameter names) for ``preset``."""
    gen = torch.Generator().manual_seed(seed)
    h, inter = preset.hidden_size, preset.intermediate_size
    kv = preset.num_key_value_heads * preset.head_dim

    def linear(out_features: int, in_features: int) -> torch.Tensor:
        std = 1.0 / math.sqrt(in_features)
        return torch.randn(out_features, in_features, generator=gen) * std

    def norm_weight() -> torch.Tensor:
        return 1.0 + 0.1 * torch.randn(h, generator=gen)

    state: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": torch.randn(preset.vocab_size, h, generator=gen),
    }
    for i in range(preset.num_hidden_layers):
        p = f"model.layers.{i}."
        state[p + "self_attn.q_proj.weight"] = linear(h, h)
        state[p + "self_attn.k_proj.weight"] = linear(kv, h)
        state[p + "self_attn.v_proj.weight"] = linear(kv, h)
        state[p + "self_attn.o_proj.weight"] = linear(h, h)
        state[p + "mlp.gate_proj.weight"] = linear(inter, h)
        state[p + "mlp.up_proj.weight"] = linear(inter, h)
        state[p + "mlp.down_proj.weight"] = linear(h, inter)
        state[p + "input_layernorm.weight"] = norm_weight()
        state[p + "post_attention_layernorm.weight"] = norm_weight()
    state["model.norm.weight"] = norm_weight()
    state["lm_head.weight"] = linear(preset.vocab_size, h) * LOGIT_STD
    dtype = getattr(torch, preset.dtype)
    return {name: t.to(dtype).contiguous() for name, t in state.items()}

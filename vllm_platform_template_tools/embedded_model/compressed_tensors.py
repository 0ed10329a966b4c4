"""W8A8 INT8 in the compressed-tensors layout: the quantized models the project writes.

The layout llm-compressor writes for its ``W8A8`` scheme and vLLM's
``compressed-tensors`` method reads (``int-quantized`` format): every linear layer of
the decoder (not the embedding, not ``lm_head``, not a mixture of experts' router, as
llm-compressor's Mixtral recipes ignore it) stores ``weight`` as int8 with one fp32
``weight_scale`` per output channel (``[out, 1]``, symmetric: ``w ~= q * scale``, ``q``
in [-127, 127]); activations are quantized at run time, per token, symmetric. A
Mixtral's experts (``block_sparse_moe.experts.N.w1/w2/w3``) are linear layers too.

:func:`dequantized` gives the fp weights the int8 ones stand for: the reference a
quantized engine is judged against (transformers with the same weights).
"""

from __future__ import annotations

import torch

QUANTIZED_SUFFIXES = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    # a Mixtral's experts: gate, down and up projections
    ".w1.weight",
    ".w2.weight",
    ".w3.weight",
)
# llm-compressor's Mixtral recipes keep the router (its logits pick the experts)
ROUTER_IGNORE = "re:.*block_sparse_moe.gate$"
INT8_MAX = 127


def quantization_config(is_moe: bool = False) -> dict:
    """``config.json``'s ``quantization_config``: W8A8 INT8, per-channel weights, dynamic
    per-token activations (llm-compressor's ``W8A8`` preset scheme); ``is_moe``: the
    router is not quantized."""
    return {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 8,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "channel",
                    "dynamic": False,
                },
                "input_activations": {
                    "num_bits": 8,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "token",
                    "dynamic": True,
                },
                "output_activations": None,
            }
        },
        "ignore": ["lm_head", ROUTER_IGNORE] if is_moe else ["lm_head"],
        "kv_cache_scheme": None,
    }


def is_quantized(name: str) -> bool:
    return name.endswith(QUANTIZED_SUFFIXES)


def quantize_w8a8(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with every decoder linear weight replaced by int8 ``weight`` and fp32
    ``weight_scale`` (per output channel, symmetric round-to-nearest)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if not is_quantized(name):
            out[name] = tensor
            continue
        w = tensor.float()
        scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / INT8_MAX
        out[name] = torch.round(w / scale).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
        out[name.removesuffix("weight") + "weight_scale"] = scale.contiguous()
    return out


def dequantized(state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The fp ``dtype`` weights a W8A8 state dict stands for (``q * scale``), under the
    unquantized model's names."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name.endswith("weight_scale"):
            continue
        if is_quantized(name):
            scale = state[name.removesuffix("weight") + "weight_scale"]
            out[name] = (tensor.float() * scale).to(dtype)
        else:
            out[name] = tensor
    return out

"""Model shapes the GPU benchmarks run with vLLM's dummy weights (config only, no checkpoint).

The embedded models (``tiny``, ``small``) are too small to load a GPU; these are
Llama shapes of real models: Llama-3.1-8B also in W8A8 INT8 (compressed-tensors, the
embedded writer's scheme: int8 weights with per-channel scales, dummy values), and
Mixtral-8x7B's layer at 8 of its 32 layers (a mixture of experts). vLLM makes their
weights on the device (``load_format="dummy"``), so nothing is written but ``config.json``, and the
engine runs on token ids alone (``skip_tokenizer_init``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vllm_platform_template_tools.embedded_model.compressed_tensors import quantization_config
from vllm_platform_template_tools.embedded_model.presets import ModelPreset
from vllm_platform_template_tools.embedded_model.writer import default_cache_dir, hf_config

SHAPES: dict[str, ModelPreset] = {
    # The 1.1B Llama shape of the shared reference's stock-vs-template measurements.
    "1.1b": ModelPreset(
        name="1.1b",
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
        max_position_embeddings=4096,
        dtype="bfloat16",
    ),
    # Llama-3.1-8B's shape.
    "8b": ModelPreset(
        name="8b",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        max_position_embeddings=8192,
        dtype="bfloat16",
    ),
}
SHAPES["8b-w8a8"] = dataclasses.replace(SHAPES["8b"], name="8b-w8a8")
# Mixtral-8x7B's shape at 8 layers: 8 experts of 4096 -> 14336, top-2 (22.5 GB of experts).
SHAPES["mixtral-8l"] = ModelPreset(
    name="mixtral-8l",
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=8,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=32000,
    max_position_embeddings=8192,
    dtype="bfloat16",
    num_local_experts=8,
    num_experts_per_tok=2,
)
QUANTIZED = {"8b-w8a8"}  # their linear layers' weights are int8 (W8A8)


def weight_bytes(name: str, batch: int = 1) -> int:
    """Bytes of the weights a decode step of ``batch`` requests reads (all but the embedding
    rows): bf16, the decoder's linear weights int8 where quantized; of the experts only
    those the step's ``batch * top_k`` routed pairs can reach (at most all)."""
    preset = SHAPES[name]
    h, layers = preset.hidden_size, preset.num_hidden_layers
    head = preset.vocab_size * h
    linear = preset.num_parameters() - 2 * head - (2 * layers + 1) * h
    experts = layers * 3 * h * preset.intermediate_size * max(1, preset.num_local_experts)
    if preset.is_moe:
        touched = min(preset.num_local_experts, batch * preset.num_experts_per_tok)
        linear -= experts - experts * touched // preset.num_local_experts
    per_linear = 1 if name in QUANTIZED else 2
    return per_linear * linear + 2 * (head + (2 * layers + 1) * h)


def kv_bytes_per_token(name: str) -> int:
    """Bytes of KV cache one token holds (all layers, keys and values, bf16)."""
    p = SHAPES[name]
    return 2 * 2 * p.num_hidden_layers * p.num_key_value_heads * p.head_dim


def shape_model_dir(name: str) -> Path:
    """A model directory with ``config.json`` only, for ``load_format="dummy"``."""
    preset = SHAPES[name]
    out = default_cache_dir() / "bench-shapes" / name
    out.mkdir(parents=True, exist_ok=True)
    config = hf_config(preset, bos_token_id=1, eos_token_id=2)
    if name in QUANTIZED:
        config["quantization_config"] = quantization_config()
    path = out / "config.json"
    if not path.exists() or json.loads(path.read_text()) != config:
        path.write_text(json.dumps(config, indent=2))
    return out

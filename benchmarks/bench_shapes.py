"""Model shapes the GPU benchmarks run with vLLM's dummy weights (config only, no checkpoint).

The embedded models (``tiny``, ``small``) are too small to load a GPU; these are
Llama shapes of real models. vLLM makes their weights on the device
(``load_format="dummy"``), so nothing is written but ``config.json``, and the
engine runs on token ids alone (``skip_tokenizer_init``).
"""

from __future__ import annotations

import json
from pathlib import Path

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


def weight_bytes(name: str) -> int:
    """Bytes of the shape's bf16 weights a decode step reads (all but the embedding rows)."""
    preset = SHAPES[name]
    return 2 * (preset.num_parameters() - preset.vocab_size * preset.hidden_size)


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
    path = out / "config.json"
    if not path.exists() or json.loads(path.read_text()) != config:
        path.write_text(json.dumps(config, indent=2))
    return out

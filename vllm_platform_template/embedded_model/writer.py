"""Write an embedded model directory: ``config.json``, safetensors, tokenizer.

Served by ``vllm-template tiny-model``; the demo, the tests and the benchmarks
call :func:`ensure_model`, which writes the model once into a cache directory
and reuses it (a stamp file records what was written, so a half-written
directory is rewritten instead of loaded). ``tiny`` comes from the committed
trained weights and tokenizer (``trained.py``); ``small`` from seeded random
weights and a tokenizer trained at write time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from . import trained
from .presets import PRESETS, ModelPreset
from .tokenizer import BOS_TOKEN, EOS_TOKEN, build_tokenizer, save_tokenizer, special_token_id
from .weights import SEED, make_state_dict

FORMAT_VERSION = 2
STAMP_FILE = "template_model.json"


def hf_config(preset: ModelPreset, bos_token_id: int, eos_token_id: int) -> dict:
    """The ``config.json`` contents for ``preset`` (Llama architecture)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": preset.hidden_size,
        "intermediate_size": preset.intermediate_size,
        "num_hidden_layers": preset.num_hidden_layers,
        "num_attention_heads": preset.num_attention_heads,
        "num_key_value_heads": preset.num_key_value_heads,
        "head_dim": preset.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": preset.max_position_embeddings,
        "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "vocab_size": preset.vocab_size,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "dtype": preset.dtype,
        "initializer_range": 0.02,
    }


def _stamp(preset: ModelPreset) -> dict:
    source = trained.digest(preset.name) if trained.is_trained(preset.name) else SEED
    digest = hashlib.sha256(repr((preset, source, FORMAT_VERSION)).encode()).hexdigest()[:16]
    return {"preset": preset.name, "source": source, "format": FORMAT_VERSION, "digest": digest}


def default_cache_dir() -> Path:
    """The model cache: ``$VLLM_TEMPLATE_CACHE`` or ``~/.cache/vllm-platform-template``."""
    root = os.environ.get("VLLM_TEMPLATE_CACHE")
    if root:
        return Path(root).expanduser()
    return (
        Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "vllm-platform-template"
    )


def write_model(size: str, out_dir: Path) -> Path:
    """Write the ``size`` preset into ``out_dir`` (created; replaced if present)."""
    if size not in PRESETS:
        raise ValueError(f"unknown model size {size!r}; choose one of {sorted(PRESETS)}")
    preset = PRESETS[size]
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    except OSError as e:
        raise OSError(
            f"cannot write the embedded model under {out_dir.parent}: {e}. "
            "Pass --out DIR or set VLLM_TEMPLATE_CACHE to a writable directory."
        ) from e
    try:
        is_trained = trained.is_trained(preset.name)
        if is_trained:
            tokenizer = trained.load_tokenizer(preset.name)
        else:
            tokenizer = build_tokenizer(preset.vocab_size)
        save_tokenizer(tokenizer, tmp, max_length=preset.max_position_embeddings)
        config = hf_config(
            preset,
            bos_token_id=special_token_id(tokenizer, BOS_TOKEN),
            eos_token_id=special_token_id(tokenizer, EOS_TOKEN),
        )
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        generation_config = {
            "bos_token_id": config["bos_token_id"],
            "eos_token_id": config["eos_token_id"],
            "do_sample": False,
        }
        (tmp / "generation_config.json").write_text(json.dumps(generation_config, indent=2) + "\n")
        if is_trained:
            state = trained.load_state_dict(preset.name, getattr(torch, preset.dtype))
        else:
            state = make_state_dict(preset)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / STAMP_FILE).write_text(json.dumps(_stamp(preset), indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def is_complete(model_dir: Path, size: str) -> bool:
    """True if ``model_dir`` holds a fully written model of preset ``size``."""
    stamp = Path(model_dir) / STAMP_FILE
    try:
        return json.loads(stamp.read_text()) == _stamp(PRESETS[size])
    except (OSError, ValueError):
        return False


def ensure_model(size: str = "tiny", out_dir: Path | None = None) -> Path:
    """Path of the ``size`` model, writing it first if it is missing or incomplete."""
    target = Path(out_dir) if out_dir is not None else default_cache_dir() / "models" / size
    if is_complete(target, size):
        return target
    # Several processes may ask at once (parallel test workers): one writes, the others
    # wait for it and find the model complete.
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_complete(target, size):
            write_model(size, target)
    return target

"""The committed results of training ``tiny`` and ``tiny-moe`` (and ``tiny-draft``, cut
from tiny's).

Trained by the vllm-platform-template project's ``tools/train_tiny_model.py`` (its
training text extracted by the vllm-platform-template project's
``tools/austen_from_debian.py``).

``trained/`` holds the tokenizer (tiny's, shared by tiny-moe) and the weights trained on
Austen's six novels
(*Pride and Prejudice* chapters 1-58, shipped in ``text/``, and the five others
the training script reads; ``text_data.py``), the weights as fp16
safetensors (half the bytes of fp32), and the training record (command,
device, seed, settings, losses). The writer turns them into the fp32 checkpoint that vLLM and
transformers load; fp16 to fp32 is exact, so every writer gives the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

TRAINED_DIR = Path(__file__).with_name("trained")
TRAINED_PRESETS = ("tiny", "tiny-moe", "tiny-draft")
# Presets cut from another's trained weights: its first layers, embeddings, final norm and
# LM head (a draft model for speculative decoding; no training of its own).
FIRST_LAYERS_OF = {"tiny-draft": ("tiny", 1)}
# The preset whose committed tokenizer a preset uses (tiny-moe was trained with tiny's).
TOKENIZER_OF = {"tiny-moe": "tiny", "tiny-draft": "tiny"}


def _weights_of(name: str) -> str:
    return FIRST_LAYERS_OF[name][0] if name in FIRST_LAYERS_OF else name


def weights_path(root: Path = TRAINED_DIR, name: str = "tiny") -> Path:
    return root / f"{_weights_of(name)}.safetensors"


def tokenizer_path(root: Path = TRAINED_DIR, name: str = "tiny") -> Path:
    return root / f"{TOKENIZER_OF.get(name, name)}_tokenizer.json"


def training_record_path(root: Path = TRAINED_DIR, name: str = "tiny") -> Path:
    return root / f"{_weights_of(name)}_training.json"


def is_trained(name: str) -> bool:
    """True if preset ``name`` has committed trained weights (else weights are random)."""
    return name in TRAINED_PRESETS


def load_state_dict(name: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The trained weights of preset ``name``, converted to ``dtype``."""
    path = weights_path(name=name)
    if not path.is_file():
        raise FileNotFoundError(
            f"trained weights {path} are missing; reinstall the package (the "
            "vllm-platform-template project's tools/train_tiny_model.py recreates them)"
        )
    state = {k: v.to(dtype).contiguous() for k, v in load_file(str(path)).items()}
    if name in FIRST_LAYERS_OF:
        kept = FIRST_LAYERS_OF[name][1]
        state = {k: v for k, v in state.items() if _layer(k) < kept}
    return state


def _layer(key: str) -> int:
    """The decoder layer a weight belongs to (``model.layers.N.``); -1 for the others."""
    parts = key.split(".")
    return int(parts[2]) if parts[:2] == ["model", "layers"] else -1


def load_tokenizer(name: str) -> Tokenizer:
    return Tokenizer.from_file(str(tokenizer_path(name=name)))


def digest(name: str) -> str:
    """Hash of the committed artifacts, so a cached model dir notices new weights."""
    h = hashlib.sha256()
    for path in (weights_path(name=name), tokenizer_path(name=name)):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]

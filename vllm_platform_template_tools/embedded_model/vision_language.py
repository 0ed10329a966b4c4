"""The embedded vision-language model, ``tiny-blip2``: a BLIP-2 (vision encoder, Q-Former,
OPT decoder) small enough for a CPU test, with dummy weights from one seed.

BLIP-2 because vLLM 0.32 serves it without torchvision: its LLaVA, Qwen2-VL, Gemma 3 and
PaliGemma reach transformers' image processors that import torchvision, which no package
index this project installs from has for the CPU build of torch. The tokenizer is tiny's
with an ``<image>`` token; the processor (transformers' ``Blip2Processor``) writes one
``<image>`` per Q-Former query before the prompt, as BLIP-2 checkpoints do. The weights
are drawn in name order from one seeded generator, not by transformers' initializers, so
that every transformers version writes the same bytes; their scale makes the decoder's
greedy tokens depend on the image.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from . import trained
from .tokenizer import BOS_TOKEN, EOS_TOKEN, save_tokenizer, special_token_id
from .writer import STAMP_FILE, staged_directory, written_once

NAME = "tiny-blip2"
SEED = 20261207
IMAGE_TOKEN = "<image>"
IMAGE_SIZE = 56  # 4 x 4 patches of 14 pixels
NUM_QUERY_TOKENS = 8  # the Q-Former's outputs: the image's tokens in the prompt
WEIGHT_STD = 0.1


def _configs(vocab_size: int, image_token_id: int, bos: int, eos: int) -> dict:
    text = {"model_type": "opt", "vocab_size": vocab_size, "hidden_size": 128, "ffn_dim": 256,
            "num_hidden_layers": 2, "num_attention_heads": 2, "word_embed_proj_dim": 128,
            "max_position_embeddings": 512, "bos_token_id": bos, "eos_token_id": eos,
            "pad_token_id": eos, "do_layer_norm_before": True,
            "tie_word_embeddings": False}  # fmt: skip
    vision = {"model_type": "blip_2_vision_model", "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": IMAGE_SIZE,
              "patch_size": 14}  # fmt: skip
    qformer = {"model_type": "blip_2_qformer", "hidden_size": 64, "intermediate_size": 128,
               "num_hidden_layers": 1, "num_attention_heads": 2, "encoder_hidden_size": 64,
               "vocab_size": vocab_size}  # fmt: skip
    return {"architectures": ["Blip2ForConditionalGeneration"], "model_type": "blip-2",
            "text_config": text, "vision_config": vision, "qformer_config": qformer,
            "num_query_tokens": NUM_QUERY_TOKENS, "image_token_index": image_token_id,
            "dtype": "float32", "tie_word_embeddings": False}  # fmt: skip


def _digest() -> str:
    source = Path(__file__).read_bytes() + trained.tokenizer_path(name="tiny").read_bytes()
    return hashlib.sha256(source + str(SEED).encode()).hexdigest()[:16]


def _seeded_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter drawn in name order from one generator: norms' weights near 1,
    biases and the rest around 0 at ``WEIGHT_STD``."""
    generator = torch.Generator().manual_seed(SEED)
    state = {}
    for name, tensor in sorted(model.state_dict().items()):
        if not tensor.is_floating_point():  # an index buffer (position ids) as it is
            state[name] = tensor.contiguous()
            continue
        noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
        is_norm = "norm" in name.lower() and name.endswith("weight")
        state[name] = (1.0 + noise * WEIGHT_STD / 4 if is_norm else noise * WEIGHT_STD).contiguous()
    return state


def write_vision_language_model(out_dir: Path) -> Path:
    """Write ``tiny-blip2`` into ``out_dir`` (replaced if present)."""
    from transformers import (
        AutoTokenizer,
        Blip2Config,
        Blip2ForConditionalGeneration,
        Blip2Processor,
        BlipImageProcessor,
    )

    with staged_directory(out_dir) as tmp:
        tokenizer_dir = tmp / "tokenizer"
        tokenizer_dir.mkdir()
        base = trained.load_tokenizer("tiny")
        save_tokenizer(base, tokenizer_dir, max_length=512)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
        image_token_id = len(tokenizer) - 1  # the token just added, after the vocabulary
        assert tokenizer.convert_tokens_to_ids(IMAGE_TOKEN) == image_token_id
        config = Blip2Config.from_dict(_configs(
            len(tokenizer), image_token_id,
            special_token_id(base, BOS_TOKEN), special_token_id(base, EOS_TOKEN)))  # fmt: skip
        model = Blip2ForConditionalGeneration(config)
        config.save_pretrained(tmp)
        save_file(_seeded_weights(model), str(tmp / "model.safetensors"), metadata={"format": "pt"})
        processor = Blip2Processor(
            image_processor=BlipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
            tokenizer=tokenizer, num_query_tokens=NUM_QUERY_TOKENS)  # fmt: skip
        processor.save_pretrained(tmp)
        shutil.rmtree(tokenizer_dir)
        (tmp / STAMP_FILE).write_text(json.dumps({"preset": NAME, "digest": _digest()}) + "\n")
    return out_dir


def ensure_vision_language_model(cache_dir: Path) -> Path:
    """The path of ``tiny-blip2`` under ``cache_dir/models``, written first if missing."""
    target = cache_dir / "models" / f"{NAME}-{_digest()}"
    return written_once(target, (target / STAMP_FILE).is_file,
                        lambda: write_vision_language_model(target))  # fmt: skip

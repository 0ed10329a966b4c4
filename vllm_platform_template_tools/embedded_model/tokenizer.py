"""A byte-level BPE tokenizer built locally with the ``tokenizers`` library.

vLLM's text prompts, chat and ``vllm serve`` need a Hugging Face tokenizer in
the model directory. None can be downloaded here, so the embedded models train
their own: ``tiny`` on its training text, Austen's novels (trained once with its
weights and committed under ``trained/``, ``trained.py``), ``small`` on a
deterministic pseudo-word corpus (``corpus.py``) at write time. Saved in the format
``transformers.AutoTokenizer`` reads (``tokenizer.json`` +
``tokenizer_config.json`` with a chat template).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from .corpus import corpus_lines

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, *ROLE_TOKENS)

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }}\n{{ message['content'] }}{{ '<|end|>' }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}\n{% endif %}"
)


def build_tokenizer(vocab_size: int) -> Tokenizer:
    """Train on the pseudo-word corpus (the random-weight ``small`` preset)."""
    # Enough pseudo-text that BPE finds at least vocab_size merges.
    return train_tokenizer(corpus_lines(num_pseudo_sentences=vocab_size * 2), vocab_size)


def train_tokenizer(lines: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE tokenizer with exactly ``vocab_size`` tokens on ``lines``."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    if tokenizer.get_vocab_size() != vocab_size:
        raise RuntimeError(
            f"tokenizer training produced {tokenizer.get_vocab_size()} tokens, "
            f"expected {vocab_size}; the training text is too small for this vocabulary"
        )
    bos_id = tokenizer.token_to_id(BOS_TOKEN)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A $B", special_tokens=[(BOS_TOKEN, bos_id)]
    )
    return tokenizer


def special_token_id(tokenizer: Tokenizer, token: str) -> int:
    """The id of one of :data:`SPECIAL_TOKENS` (always in the trained vocabulary)."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise RuntimeError(f"special token {token!r} missing from the trained tokenizer")
    return token_id


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path, max_length: int) -> None:
    """Write ``tokenizer.json`` and a ``tokenizer_config.json`` with a chat template."""
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "pad_token": EOS_TOKEN,
        "add_bos_token": True,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special = {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": EOS_TOKEN}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")

"""Training text for the ``small`` preset's tokenizer: a deterministic pseudo-word corpus.

Only ``small`` (seeded random weights, for speed work) uses it:
``tokenizer.build_tokenizer`` trains its tokenizer on these lines when the model
is written. The ``tiny`` model's tokenizer and weights are trained on Jane
Austen's novels and committed under ``trained/`` (``trained.py``,
``text_data.py``); nothing here reaches it.

The corpus must be deterministic: a fixed set of paragraphs plus pseudo-words
drawn from a seeded generator. Same input, same merges, same vocabulary on
every machine. The paragraphs are training data, not documentation (the one
that says "random weights" is true of ``small``); changing a character of them
changes ``small``'s vocabulary and token ids.
"""

from __future__ import annotations

import random

_PARAGRAPHS = (
    "The quick brown fox jumps over the lazy dog while the hardware vendor ports vLLM "
    "to a new accelerator. A platform plugin tells vLLM which device to use, how to "
    "compile the model, which kernels implement each operation and how to capture "
    "graphs that replay without launch overhead.",
    "Hello, my name is Template. I am a small language model with random weights. "
    "I was written by a deterministic generator so that tests can compare tokens "
    "between stock vLLM, the plugin and Hugging Face transformers.",
    "The capital of France is Paris. The capital of Italy is Rome. The capital of "
    "Japan is Tokyo. Rivers flow to the sea, and the sea returns the rain.",
    "Once upon a time, in a data center far away, a scheduler batched requests, an "
    "attention kernel read the paged key-value cache, and a sampler picked the next "
    "token greedily, one step after another.",
    "def rms_norm(x, weight, eps):\n    variance = x.pow(2).mean(-1, keepdim=True)\n"
    "    return x * torch.rsqrt(variance + eps) * weight\n",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 16 32 64 128 256 512 1024 2048 4096 8192.",
)

_SYLLABLES = (
    "ka",
    "ri",
    "to",
    "mes",
    "lan",
    "vor",
    "qui",
    "del",
    "ser",
    "an",
    "ex",
    "tra",
    "pol",
    "mun",
    "ber",
    "cha",
    "zen",
    "tor",
    "lix",
    "ome",
    "ur",
    "is",
    "ga",
    "fen",
    "dra",
    "lo",
    "pri",
    "sum",
    "vel",
    "nox",
    "ter",
    "ash",
    "el",
    "bo",
    "cy",
    "dun",
)


def corpus_lines(num_pseudo_sentences: int, seed: int = 1234) -> list[str]:
    """The fixed paragraphs (repeated, so their words merge first) followed by
    ``num_pseudo_sentences`` seeded pseudo-sentences that supply the remaining merges."""
    rng = random.Random(seed)
    lines = list(_PARAGRAPHS) * 64
    for _ in range(num_pseudo_sentences):
        words = []
        for _ in range(rng.randint(4, 14)):
            word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))
            words.append(word.capitalize() if rng.random() < 0.1 else word)
        lines.append(" ".join(words) + rng.choice((".", ",", "!", "?", ";")))
    return lines

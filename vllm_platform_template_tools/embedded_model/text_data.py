"""The shipped public-domain text, split into training text and a held-out part.

The ``tiny`` embedded model is trained on *Pride and Prejudice* (``text/``,
see its README for the source) chapters before :data:`HELD_OUT_FIRST_CHAPTER`,
together with Austen's five other novels (not shipped: the training script that
``trained.py`` names reads them, sha256-checked). The rest of *Pride and Prejudice*
is held out: the training script validates on it, and :func:`held_out_passage` is
the passage whose perplexity the demo reports and the e2e tier compares across stock
vLLM, the template platform and transformers (as evaluation harnesses score a model
through vLLM's ``prompt_logprobs``).

Paragraphs are re-flowed (the file is hard-wrapped at 70 columns) and the
underscores that mark italics are dropped, so the model writes flowing prose.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

TEXT_PATH = Path(__file__).with_name("text") / "pride_and_prejudice.txt"
HELD_OUT_FIRST_CHAPTER = 59
PASSAGE_CHAPTER = 60
PASSAGE_MAX_CHARS = 1000
PARAGRAPH_SEPARATOR = "\n"

_CHAPTER = re.compile(r"Chapter (\d+)")


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a hard-wrapped text, re-flowed, italics underscores dropped."""
    flowed = (" ".join(block.split()).replace("_", "") for block in re.split(r"\n\s*\n", text))
    return [paragraph for paragraph in flowed if paragraph]


@cache
def chapters() -> tuple[tuple[str, ...], ...]:
    """Paragraphs of each chapter; index 0 is the title page, index n chapter n."""
    result: list[list[str]] = [[]]
    for paragraph in paragraphs(TEXT_PATH.read_text(encoding="ascii")):
        match = _CHAPTER.fullmatch(paragraph)
        if match:
            if int(match.group(1)) != len(result):
                raise ValueError(f"{TEXT_PATH.name}: chapters out of order at {paragraph!r}")
            result.append([])
        result[-1].append(paragraph)
    return tuple(tuple(c) for c in result)


def training_paragraphs() -> list[str]:
    """Title page and chapters 1 to ``HELD_OUT_FIRST_CHAPTER - 1``, in order."""
    return [p for c in chapters()[:HELD_OUT_FIRST_CHAPTER] for p in c]


def held_out_paragraphs() -> list[str]:
    """Chapters ``HELD_OUT_FIRST_CHAPTER`` to the end: never seen in training."""
    return [p for c in chapters()[HELD_OUT_FIRST_CHAPTER:] for p in c]


def held_out_passage() -> str:
    """Whole paragraphs from the start of chapter ``PASSAGE_CHAPTER`` (held out),
    at most ``PASSAGE_MAX_CHARS`` characters: about 220 tokens of the tiny model."""
    passage = ""
    for paragraph in chapters()[PASSAGE_CHAPTER]:
        candidate = passage + PARAGRAPH_SEPARATOR + paragraph if passage else paragraph
        if len(candidate) > PASSAGE_MAX_CHARS:
            break
        passage = candidate
    return passage

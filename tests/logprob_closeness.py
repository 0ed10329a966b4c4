"""vLLM's logprob-closeness rule for greedy outputs that may legitimately diverge (bf16).

A re-implementation of ``check_logprobs_close`` in vLLM's ``tests/models/utils.py``:
two greedy sequences may differ once two correct kernels round differently, but at
the first position where they differ, each side's token must be among the other
side's top-k logprobs at that position; after that the sequences are free to part
(their prefixes differ). Equal sequences pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TopLogprobs = Mapping[int, float]  # token id -> logprob, the top-k at one position


@dataclass(frozen=True)
class Divergence:
    prompt: int
    position: int  # index in the generated tokens; None-free: only built on a divergence
    token_a: int
    token_b: int


def first_divergence(
    tokens_a: Sequence[int],
    tokens_b: Sequence[int],
    logprobs_a: Sequence[TopLogprobs],
    logprobs_b: Sequence[TopLogprobs],
    prompt: int = 0,
    name_a: str = "a",
    name_b: str = "b",
) -> Divergence | None:
    """None if equal; the divergence if it is a close one; raises AssertionError otherwise."""
    length = min(len(tokens_a), len(tokens_b))
    for position in range(length):
        token_a, token_b = tokens_a[position], tokens_b[position]
        if token_a == token_b:
            continue
        top_a, top_b = logprobs_a[position], logprobs_b[position]
        if token_a not in top_b or token_b not in top_a:
            raise AssertionError(
                f"prompt {prompt}: {name_a} and {name_b} diverge at position {position} "
                f"({name_a} {token_a}, {name_b} {token_b}) and the tokens are not in each "
                f"other's top-{min(len(top_a), len(top_b))} logprobs: {name_a} top "
                f"{dict(top_a)}, {name_b} top {dict(top_b)}\n"
                f"{name_a}: {list(tokens_a)}\n{name_b}: {list(tokens_b)}"
            )
        return Divergence(prompt, position, token_a, token_b)
    if len(tokens_a) != len(tokens_b):
        raise AssertionError(
            f"prompt {prompt}: {name_a} has {len(tokens_a)} tokens, {name_b} {len(tokens_b)}"
        )
    return None


def report_outputs(report: Mapping) -> list[tuple[list[int], list[dict[int, float]]]]:
    """A demo report's greedy outputs with the top logprobs of each step, as
    :func:`check_logprobs_close` takes them (JSON made the logprobs' token ids strings)."""
    return [
        (tokens, [{int(t): lp for t, lp in step.items()} for step in steps])
        for tokens, steps in zip(report["tokens"], report["logprobs"], strict=True)
    ]


def check_logprobs_close(
    outputs_a: Sequence[tuple[Sequence[int], Sequence[TopLogprobs]]],
    outputs_b: Sequence[tuple[Sequence[int], Sequence[TopLogprobs]]],
    name_a: str = "a",
    name_b: str = "b",
) -> list[Divergence]:
    """Check every prompt's pair of greedy outputs; return where the sequences diverged."""
    assert len(outputs_a) == len(outputs_b), f"{len(outputs_a)} vs {len(outputs_b)} prompts"
    assert outputs_a, "no outputs to compare"
    divergences = []
    for prompt, ((tokens_a, lp_a), (tokens_b, lp_b)) in enumerate(
        zip(outputs_a, outputs_b, strict=True)
    ):
        assert len(lp_a) >= len(tokens_a) and len(lp_b) >= len(tokens_b), "logprobs missing"
        found = first_divergence(tokens_a, tokens_b, lp_a, lp_b, prompt, name_a, name_b)
        if found is not None:
            divergences.append(found)
    return divergences

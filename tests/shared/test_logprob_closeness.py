"""The bf16 parity rule itself: it must fail on really different outputs."""

from __future__ import annotations

import pytest
from logprob_closeness import check_logprobs_close, first_divergence


def _top(*tokens: int) -> dict[int, float]:
    return {t: -0.1 * (i + 1) for i, t in enumerate(tokens)}


def test_equal_sequences_pass_with_no_divergence() -> None:
    lp = [_top(1, 2), _top(2, 3), _top(3, 4)]
    assert check_logprobs_close([([1, 2, 3], lp)], [([1, 2, 3], lp)]) == []


def test_legitimate_divergence_passes_and_reports_its_position() -> None:
    # At position 1 the two sides rank 5 and 6 in swapped order: a rounding tie.
    a = ([1, 5, 9, 9], [_top(1, 2), _top(5, 6), _top(9), _top(9)])
    b = ([1, 6, 7, 8], [_top(1, 2), _top(6, 5), _top(7), _top(8)])
    (d,) = check_logprobs_close([a], [b])
    assert (d.prompt, d.position, d.token_a, d.token_b) == (0, 1, 5, 6)


def test_token_outside_the_others_top_k_fails() -> None:
    a = ([1, 5], [_top(1), _top(5, 6)])
    b = ([1, 7], [_top(1), _top(7, 8)])  # 5 is not in b's top-k, 7 not in a's
    with pytest.raises(AssertionError, match="diverge at position 1"):
        check_logprobs_close([a], [b])


def test_one_sided_containment_fails() -> None:
    # b's token is in a's top-k, but a's token is not in b's: vLLM's rule needs both.
    with pytest.raises(AssertionError, match="position 0"):
        first_divergence([5], [6], [_top(5, 6)], [_top(6, 7)])


def test_really_different_outputs_fail() -> None:
    a = ([10, 11, 12], [_top(10, 20), _top(11), _top(12)])
    b = ([30, 31, 32], [_top(30, 40), _top(31), _top(32)])
    with pytest.raises(AssertionError, match="position 0"):
        check_logprobs_close([a, a], [a, b])


def test_different_lengths_fail() -> None:
    lp = [_top(1), _top(2)]
    with pytest.raises(AssertionError, match="tokens"):
        check_logprobs_close([([1, 2], lp)], [([1], lp[:1])])


def test_no_outputs_fail() -> None:
    with pytest.raises(AssertionError):
        check_logprobs_close([], [])

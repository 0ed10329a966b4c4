"""A support-matrix cell says no more than its feature's tests did (``tests/feature_matrix.py``)."""

from __future__ import annotations

from feature_matrix import cell_of


def _run(name: str, outcome: str, cell: str = "", reason: str = "") -> dict[str, str]:
    return {"test": f"test_x.py::{name}", "outcome": outcome, "cell": cell, "reason": reason}


def test_passed_only_when_every_test_passed() -> None:
    assert cell_of([_run("a", "passed"), _run("b", "passed")]) == "passed"
    partly = cell_of([_run("a", "passed"), _run("b", "skipped", reason="needs two devices")])
    assert partly == "passed a; not run: b (needs two devices)"


def test_a_failure_names_its_test_whatever_else_passed() -> None:
    runs = [_run("a", "passed", cell="refused: no"), _run("b", "failed"), _run("c", "skipped")]
    assert cell_of(runs) == "failed: b"


def test_not_run_says_why() -> None:
    runs = [_run("a", "skipped", reason="no GPU"), _run("b", "skipped", reason="no GPU")]
    assert cell_of(runs) == "not run: no GPU"
    assert cell_of([_run("a", "skipped")]) == "not run: every test skipped"


def test_what_passing_tests_recorded_is_the_cell() -> None:
    runs = [_run("a", "passed", cell="refused: stock refuses it too"), _run("b", "passed")]
    assert cell_of(runs) == "refused: stock refuses it too"

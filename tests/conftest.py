"""Shared test configuration.

Tiers: ``tests/unit`` (fast, no engine), ``tests/e2e`` (marked ``e2e``; each
engine start costs tens of seconds on a 2-core machine, so e2e tests share
engine runs through the session-scoped fixtures in ``tests/e2e/conftest.py``),
and the device tier (marked ``gpu``: the tests that need the device folder's
device, skipped without it). This directory is on
``sys.path`` (pytest's prepend import mode), so the test helpers here
(``hf_reference``, ``logprob_closeness``, ``engine_exit``) import by name.
"""

from __future__ import annotations

import os

import pytest

from vllm_platform_template.platform_hooks.activation import DEVICE_ENV


@pytest.fixture(autouse=True)
def _no_template_device_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start with the plugin inactive unless they set the device themselves."""
    if DEVICE_ENV in os.environ:
        monkeypatch.delenv(DEVICE_ENV)


_terminal: list[object] = []


def pytest_configure(config: pytest.Config) -> None:
    _terminal.append(config.pluginmanager.get_plugin("terminalreporter"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``TEMPLATE_TEST_FAILURES_AT_ONCE=1``, print each failure when it happens.

    The GPU tier's calls end at a hard time limit; pytest (and pytest-xdist's
    controller) print failure details only at the end of the session, so a call
    cut off would name a failed test without saying why.
    """
    if not (report.failed and os.environ.get("TEMPLATE_TEST_FAILURES_AT_ONCE") == "1"):
        return
    text = f"--- {report.nodeid} ({report.when}) failed:\n{report.longreprtext[-6000:]}"
    terminal = _terminal[-1] if _terminal else None
    if terminal is not None:
        terminal.write_line(text)  # type: ignore[attr-defined]
    else:
        print(text)

"""The e2e tier accepts stock vLLM's exit-time abort, and nothing else (tests/engine_exit.py)."""

from __future__ import annotations

import signal
import subprocess

from engine_exit import STOCK_EXIT_ABORT, stock_exit_abort

COMPLETE = "... [shutdown] MPClient: complete\n" + STOCK_EXIT_ABORT + "\n"
FORCE_KILLED = (
    "... [shutdown] Process manager: force killing remaining process EngineCore pid 1\n"
    + STOCK_EXIT_ABORT
    + "\n"
)
REPORT = '{"tokens": [[1, 2]]}'


def _proc(returncode: int, stdout: str, stderr: str) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


def test_stock_abort_after_a_complete_run_is_accepted() -> None:
    assert stock_exit_abort(["--stock"], _proc(-signal.SIGABRT, REPORT, COMPLETE))


def test_stock_abort_after_a_force_killed_engine_core_is_accepted() -> None:
    assert stock_exit_abort(["--stock"], _proc(-signal.SIGABRT, REPORT, FORCE_KILLED))


def test_stock_abort_with_a_partial_report_is_not_accepted() -> None:
    assert not stock_exit_abort(["--stock"], _proc(-signal.SIGABRT, REPORT[:-3], COMPLETE))


def test_template_abort_is_not_accepted() -> None:
    assert not stock_exit_abort([], _proc(-signal.SIGABRT, REPORT, COMPLETE))


def test_other_failures_are_not_accepted() -> None:
    assert not stock_exit_abort(["--stock"], _proc(1, REPORT, COMPLETE))
    assert not stock_exit_abort(["--stock"], _proc(-signal.SIGABRT, "", COMPLETE))
    assert not stock_exit_abort(
        ["--stock"], _proc(-signal.SIGABRT, REPORT, COMPLETE + "Traceback ...\n")
    )

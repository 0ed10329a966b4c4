"""Which non-zero exits of an engine run the e2e tier accepts: one, stock vLLM's exit-time abort.

On ``sys.path`` through ``tests/conftest.py`` (pytest's prepend import mode).
"""

from __future__ import annotations

import json
import signal
import subprocess

# Stock vLLM CPU (plugin inactive) has been seen, twice in CI under load, to abort
# at interpreter exit after a complete run: its JSON report printed, then a C++
# std::thread destroyed while joinable ("terminate called without an active
# exception", SIGABRT) - once after "[shutdown] MPClient: complete", once after
# the process manager force-killed an EngineCore that was slow to exit. The
# reference run's report is complete and valid, so such a stock run is accepted;
# a template run that does the same still fails (the plugin must exit cleanly).
STOCK_EXIT_ABORT = "terminate called without an active exception"


def stock_exit_abort(args: list[str], proc: subprocess.CompletedProcess) -> bool:
    """True for stock vLLM's exit-time abort after a complete run (see above)."""
    stderr_lines = proc.stderr.strip().splitlines()
    return (
        "--stock" in args
        and proc.returncode == -signal.SIGABRT
        and _complete_report(proc.stdout)
        and bool(stderr_lines)
        and stderr_lines[-1].strip() == STOCK_EXIT_ABORT
    )


def _complete_report(stdout: str) -> bool:
    """True when ``stdout`` is the demo's whole JSON report (it is printed in one write)."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return False
    return isinstance(report, dict) and bool(report)

"""Which non-zero exits of an engine run the e2e tier accepts: one, stock vLLM's exit-time abort.

On ``sys.path`` through ``tests/conftest.py`` (pytest's prepend import mode).
"""

from __future__ import annotations

import signal
import subprocess

# Stock vLLM CPU (plugin inactive) has been seen, once under heavy load, to abort
# at interpreter exit after a complete run: its report printed, "[shutdown]
# MPClient: complete" logged, then a C++ std::thread destroyed while joinable
# ("terminate called without an active exception", SIGABRT). The reference run's
# tokens are complete and valid, so such a stock run is accepted; a template run
# that does the same still fails (the plugin must exit cleanly).
STOCK_EXIT_ABORT = "terminate called without an active exception"


def stock_exit_abort(args: list[str], proc: subprocess.CompletedProcess) -> bool:
    """True for stock vLLM's exit-time abort after a complete run (see above)."""
    stderr_lines = proc.stderr.strip().splitlines()
    return (
        "--stock" in args
        and proc.returncode == -signal.SIGABRT
        and bool(proc.stdout.strip())
        and bool(stderr_lines)
        and stderr_lines[-1].strip() == STOCK_EXIT_ABORT
        and "[shutdown] MPClient: complete" in proc.stderr
    )

"""Ending a process after its exit handlers (``process_exit``) and the shutdown patches."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from vllm_platform_template import shutdown


def _run(body: str) -> subprocess.CompletedProcess:
    code = "import atexit, sys\nfrom vllm_platform_template import process_exit\n" + body
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )


# A cycle whose finalizer prints: it runs only if the interpreter's final collection runs.
CYCLE = (
    "class C:\n    def __del__(self):\n        print('collected at exit', flush=True)\n"
    "c = C(); c.self = c\n"
)


def test_the_exit_handlers_run_then_the_process_ends_without_finalization() -> None:
    proc = _run(
        "atexit.register(lambda: print('handler ran', flush=True))\n"
        + CYCLE
        + "process_exit.exit_after_the_exit_handlers(0)\nprint('done')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["done", "handler ran"]


def test_a_later_handler_or_an_uncaught_error_keeps_the_normal_exit() -> None:
    later = _run(
        CYCLE + "process_exit.exit_after_the_exit_handlers(0)\n"
        "atexit.register(lambda: print('late handler ran', flush=True))\n"
    )
    assert later.returncode == 0 and "late handler ran" in later.stdout
    assert "collected at exit" in later.stdout  # the interpreter finished as usual
    failed = _run("process_exit.exit_after_the_exit_handlers(0)\nraise RuntimeError('boom')\n")
    assert failed.returncode == 1 and "RuntimeError: boom" in failed.stderr


@pytest.mark.parametrize(
    ("error", "clean"),
    [(None, True), (SystemExit(), True), (SystemExit(0), True), (SystemExit(3), False),
     (RuntimeError("x"), False)],
)  # fmt: skip
def test_only_a_clean_ending_skips_finalization(error: BaseException | None, clean: bool) -> None:
    if error is None:
        assert shutdown.ending_cleanly() is clean
        return
    try:
        raise error
    except BaseException:
        assert shutdown.ending_cleanly() is clean


def test_abort_mode_gets_vllms_grace_and_other_budgets_are_kept() -> None:
    import vllm.v1.engine.utils as engine_utils

    original = engine_utils.get_engine_process_shutdown_timeout
    try:
        shutdown._grace_instead_of_zero(engine_utils)
        patched = engine_utils.get_engine_process_shutdown_timeout
        assert patched(0, 0) == shutdown.ENGINE_EXIT_GRACE_S
        assert patched(0, 3.0) == 3.0
        assert patched(10, 0) == 0  # a drain deadline already spent gets no new grace
        assert patched(None, None) is None
    finally:
        engine_utils.get_engine_process_shutdown_timeout = original

"""Ending a process whose work is done without the interpreter's finalization.

A process that imported torch and vLLM holds 650-780 thousand objects the
garbage collector tracks. At exit the interpreter runs several cyclic
collections over all of them and tears every module down: two to three
seconds on an idle 2-core host, twice that on a busy one, spent freeing
memory the operating system reclaims anyway. vLLM gives its engine process 5 s
to stop, its worker's exit included, so a busy host force-killed it
(``patches.py``, ``end_spawned_processes_like_forked_ones``); the demo's own
process kept its user waiting as long after the report.

:func:`exit_after_the_exit_handlers` ends the process the way
``multiprocessing`` ends a forked child: every exit handler runs (``atexit``:
logging's flush, ``weakref.finalize`` callbacks, vLLM's and torch's
clean-ups), stdout and stderr are flushed, then ``os._exit``. Imports nothing of
the plugin; no vLLM hook: the patch registry and the ``demo`` command call it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys


def exit_after_the_exit_handlers(code: int) -> None:
    """At interpreter exit, run the exit handlers, flush, then ``os._exit(code)``.

    Call it when the process's work is done and its exit status is ``code``.
    The handler registered here runs first at exit (handlers run last in, first
    out); it runs every other handler in the interpreter's order
    (``atexit._run_exitfuncs``), flushes stdout and stderr, and ends the process
    without finalization: no cyclic collections over the whole heap, no module
    teardown, no C++ static destructors - as ``multiprocessing`` ends a forked
    child. Nothing is skipped, and the interpreter finishes as usual, where a
    handler was registered after this call (it has run already by then) or an
    uncaught exception was reported since (``sys.last_value``: the status is 1).
    """
    registered: list[int] = []
    last_error = getattr(sys, "last_value", None)

    def handler() -> None:
        if atexit._ncallbacks() != registered[0]:
            return
        if getattr(sys, "last_value", None) is not last_error:
            return
        atexit.unregister(handler)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)

    atexit.register(handler)
    registered.append(atexit._ncallbacks())

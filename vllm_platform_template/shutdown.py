"""The code of the registry's shutdown and signal patches: how vLLM's processes stop.

Each public function named after a patch of ``patches.py`` (its why, upstream
reference and removal condition are there) applies it, rebinding an object of a
vLLM module once vLLM imports it (``after_import``). No vLLM hook exists for
any of them; every device gets them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import os
import queue
import sys
import time
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from vllm_platform_template.after_import import after_import
from vllm_platform_template.log import get_logger
from vllm_platform_template.process_exit import exit_after_the_exit_handlers

logger = get_logger(__name__)


@contextlib.contextmanager
def no_garbage_collection() -> Iterator[None]:
    """No garbage collection inside (``gc.collect`` a no-op, automatic collection off)."""
    from unittest.mock import patch

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with patch("gc.collect", lambda *a, **k: 0):
            yield
    finally:
        if was_enabled:
            gc.enable()


# The classes whose ``shutdown`` is the last thing a dedicated vLLM process runs:
# ``run_engine_core`` and ``WorkerProc.worker_main`` call it in their ``finally``, then
# the process returns from its multiprocessing target and the interpreter finalizes.
EXITING_PROCESS_CLASSES = (
    ("vllm.v1.engine.core", "EngineCoreProc"),
    ("vllm.v1.executor.multiproc_executor", "WorkerProc"),
)


# The shared-memory segments of vLLM's CPU communicator this process created. vLLM 0.32's
# C++ SHMManager (csrc/cpu/shm.cpp) names each rank's ``<group name>_<rank>`` and unlinks
# it in a static destructor, which a process ended by os._exit never runs.
CPU_SHM_MODULE = "vllm.distributed.device_communicators.cpu_communicator"
SHM_DIR = "/dev/shm"
created_cpu_shm: list[str] = []


def end_spawned_processes_like_forked_ones() -> None:
    """After vLLM's orderly teardown of a spawned engine or worker process, skip finalization
    (unlinking first the CPU communicator's segments that finalization would have)."""
    for module_name, class_name in EXITING_PROCESS_CLASSES:
        after_import(module_name, functools.partial(_exit_after_shutdown, class_name=class_name))
    after_import(CPU_SHM_MODULE, _remember_created_cpu_shm)


def _remember_created_cpu_shm(module: types.ModuleType) -> None:
    cls = getattr(module, "_CPUSHMDistributed", None)
    original = getattr(cls, "_init_cpu_shm", None)
    if cls is None or original is None or getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def _init_cpu_shm(self: Any) -> Any:
        handle = original(self)
        created_cpu_shm.append(f"{self.group_name}_{self.communicator.rank}")
        return handle

    _init_cpu_shm.__template_patched__ = True  # type: ignore[attr-defined]
    cls._init_cpu_shm = _init_cpu_shm


def unlink_created_cpu_shm() -> None:
    """Unlink the CPU communicator's segments this process created (the other ranks keep
    their mappings; nothing opens them by name after the communicator's start)."""
    while created_cpu_shm:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(SHM_DIR, created_cpu_shm.pop()))


def _exit_after_shutdown(module: types.ModuleType, class_name: str) -> None:
    cls = getattr(module, class_name, None)
    original = getattr(cls, "shutdown", None)
    if cls is None or original is None or getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def shutdown(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not (multiprocessing_child() and ending_cleanly()):
            return original(self, *args, **kwargs)
        # The process ends after this teardown: vLLM's full collections in it
        # (the model runner's and cleanup_dist_env_and_memory's gc.collect) free
        # nothing the OS would not, and cost a second each on a busy host.
        with no_garbage_collection():
            result = original(self, *args, **kwargs)
        gc.disable()
        unlink_created_cpu_shm()
        exit_after_the_exit_handlers(0)
        return result

    shutdown.__template_patched__ = True  # type: ignore[attr-defined]
    cls.shutdown = shutdown


def multiprocessing_child() -> bool:
    """True in a process vLLM started through ``multiprocessing`` (engine core, worker).

    An engine built in the user's own process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``)
    runs ``EngineCore``, not ``EngineCoreProc``, and no ``WorkerProc``; Ray actors are
    no multiprocessing children either: their processes are left to end as they do.
    """
    import multiprocessing

    return multiprocessing.parent_process() is not None


def ending_cleanly() -> bool:
    """True unless an exception other than ``SystemExit(0)`` is propagating.

    ``shutdown`` runs in the ``finally`` of the process's target: the exception
    on its way out (if any) decides the exit status. A failing process keeps
    the interpreter's normal exit: its traceback and status 1.
    """
    error = sys.exc_info()[1]
    return error is None or (isinstance(error, SystemExit) and error.code in (None, 0))


# vLLM's generic grace for a process at shutdown (v1/utils.py::shutdown, timeout None).
ENGINE_EXIT_GRACE_S = 5.0


class ReapedAwareProcess:
    """A ``multiprocessing`` process as vLLM's shutdown sees it, alive only if its pid is.

    ``Process.is_alive`` polls ``waitpid``; when another thread (vLLM's engine
    liveness monitor) reaps the child first, the poll gets ``ECHILD`` and
    multiprocessing answers "alive" for a process that is gone.
    """

    def __init__(self, process: Any) -> None:
        self._process = process

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)

    def is_alive(self) -> bool:
        if not self._process.is_alive():
            return False
        pid = self._process.pid
        try:
            os.kill(pid, 0)
        except ProcessLookupError:  # reaped by another thread: it has exited
            return False
        except PermissionError:  # someone else's pid now: ours has exited
            return False
        return True


def reaped_process_is_not_force_killed() -> None:
    """vLLM's process shutdown asks a reaped-aware liveness of each process."""
    for module_name in ("vllm.v1.utils", "vllm.v1.engine.utils"):
        after_import(module_name, _shutdown_with_reaped_aware_processes)


def _shutdown_with_reaped_aware_processes(module: types.ModuleType) -> None:
    original = getattr(module, "shutdown", None)
    if original is None or getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def shutdown(procs: list[Any], timeout: float | None = None) -> None:
        return original([ReapedAwareProcess(p) for p in procs], timeout=timeout)

    shutdown.__template_patched__ = True  # type: ignore[attr-defined]
    setattr(module, "shutdown", shutdown)  # noqa: B010  (the rebinding is this patch)


def engine_exit_grace_in_abort_mode() -> None:
    """``vllm serve``'s abort-mode shutdown gives the EngineCore vLLM's 5 s, not 0 s."""
    after_import("vllm.v1.engine.utils", _grace_instead_of_zero)


def _grace_instead_of_zero(module: types.ModuleType) -> None:
    original = getattr(module, "get_engine_process_shutdown_timeout", None)
    if original is None or getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def get_engine_process_shutdown_timeout(
        request_timeout: float | None, process_timeout: float | None
    ) -> float | None:
        timeout = original(request_timeout, process_timeout)
        if request_timeout == 0 and timeout == 0:
            return ENGINE_EXIT_GRACE_S
        return timeout

    get_engine_process_shutdown_timeout.__template_patched__ = True  # type: ignore[attr-defined]
    setattr(  # noqa: B010  (the rebinding is this patch)
        module, "get_engine_process_shutdown_timeout", get_engine_process_shutdown_timeout
    )


# The longest an idle EngineCore's main thread waits for a request without running the
# signal handlers Python has queued for it: its shutdown latency after a SIGTERM.
IDLE_WAIT_SLICE_S = 0.2


def idle_engine_core_runs_its_signal_handlers() -> None:
    """The EngineCore's blocking wait for requests returns every ``IDLE_WAIT_SLICE_S``."""
    after_import("vllm.v1.engine.core", _sliced_input_queue_waits)


def _sliced_input_queue_waits(module: types.ModuleType) -> None:
    # The patch is applied while the EngineCore is being built (vLLM loads the general
    # plugins in EngineCore.__init__): its busy loop, entered after, slices the waits.
    for name in ("EngineCoreProc", "DPEngineCoreProc"):
        cls = getattr(module, name, None)
        original = vars(cls).get("run_busy_loop") if cls is not None else None
        if original is None or getattr(original, "__template_patched__", False):
            continue
        setattr(cls, "run_busy_loop", _with_sliced_waits(original))  # noqa: B010


def _with_sliced_waits(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def run_busy_loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        requests = getattr(self, "input_queue", None)
        if isinstance(requests, queue.Queue):
            # the same queue (vLLM's threads hold it): only this instance's get changes
            requests.get = functools.partial(sliced_get, requests)  # type: ignore[method-assign]
            logger.debug("the EngineCore waits for requests in %.1f s slices", IDLE_WAIT_SLICE_S)
        return original(self, *args, **kwargs)

    run_busy_loop.__template_patched__ = True  # type: ignore[attr-defined]
    return run_busy_loop


def sliced_get(requests: queue.Queue, block: bool = True, timeout: float | None = None) -> Any:
    """``requests.get(block, timeout)`` whose blocking wait lasts ``IDLE_WAIT_SLICE_S`` at a
    time: between two slices the thread runs Python again, so the handlers of signals
    that arrived meanwhile run (in the main thread, where Python runs them)."""
    if not block:
        return queue.Queue.get(requests, False)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = IDLE_WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
        try:
            return queue.Queue.get(requests, True, max(0.0, min(IDLE_WAIT_SLICE_S, left)))
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                raise


# The longest the interpreter's exit waits for a sync client's output thread to end.
OUTPUT_THREAD_JOIN_S = 10.0


def client_threads_end_before_the_interpreter() -> None:
    """Each sync engine client stops, and its output thread ends, before finalization."""
    after_import("vllm.v1.engine.core_client", _sync_client_stopped_at_exit)


def _sync_client_stopped_at_exit(module: types.ModuleType) -> None:
    cls = getattr(module, "SyncMPClient", None)
    original = vars(cls).get("__init__") if cls is not None else None
    if original is None or getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        # Registered after vLLM's own weakref.finalize exit hook exists (the client made
        # its finalizer above), so it runs before that hook: handlers run last in, first out.
        atexit.register(stop_client_and_join_output_thread, weakref.ref(self),
                        self.output_queue_thread)  # fmt: skip

    __init__.__template_patched__ = True  # type: ignore[attr-defined]
    setattr(cls, "__init__", __init__)  # noqa: B010  (the rebinding is this patch)


def stop_client_and_join_output_thread(client_ref: Callable[[], Any], thread: Any) -> None:
    """At exit, in the main thread: stop the client if it runs, then wait for its output
    thread (``OUTPUT_THREAD_JOIN_S`` at most), which drops its last outputs as it ends."""
    client = client_ref()
    if client is not None:
        client.shutdown()  # a no-op once vLLM's finalizer or its monitor thread ran it
    del client
    if thread.is_alive():  # exit handlers run in the main thread, never this one
        thread.join(OUTPUT_THREAD_JOIN_S)
        if thread.is_alive():
            logger.warning(
                "vLLM's engine output thread did not end within %.0f s of the client's "
                "shutdown; the interpreter exits beside it",
                OUTPUT_THREAD_JOIN_S,
            )

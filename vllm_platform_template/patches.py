"""The registry of every rebinding of a vLLM or torch object (vLLM 0.32 and 0.33).

Where vLLM leaves no hook, the plugin changes a vLLM or torch object, and every
such change is registered, nowhere else: a :class:`Patch` entry says why it
exists, the upstream reference and when to remove it. The registry
(:func:`all_patches`) is this module's :data:`PATCHES`, the ones every device
needs (process exit, compilation, graph capture), and each device folder's
``devices/<name>/patches.py`` (its ``PATCHES``, with their code): a device's
patches travel with its folder. Two kinds:

- process patches (``scope="process"``) are applied per process from the
  ``vllm.general_plugins`` entry point (only while the template platform is
  active) by :func:`apply_patches`, and are idempotent; a platform may apply
  one earlier, by name (:func:`apply_patch`), when vLLM makes it current;
- scoped patches (``scope="call"``) rebind an object for one call or one
  instance; the function that does it lives beside its entry and the listed caller
  calls it.

This module imports nothing from the plugin but its logger, settings and
``process_exit`` (device folders' patch modules are imported by name when the
registry is read), so the compiler and the graph wrapper call it without importing
the platform layer.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import importlib
import importlib.abc
import importlib.util
import os
import queue
import sys
import time
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from vllm_platform_template.log import get_logger
from vllm_platform_template.process_exit import exit_after_the_exit_handlers
from vllm_platform_template.settings import DEVICE_PACKAGES

logger = get_logger(__name__)


@dataclass(frozen=True)
class Patch:
    name: str
    why: str
    upstream: str
    remove_when: str
    devices: tuple[str, ...]
    scope: str = "process"  # "process": apply_patches; "call": called by `caller`
    apply: Callable[[], None] | None = None
    caller: str = ""


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` right after module ``name`` is executed (once)."""

    def __init__(self, name: str, callback: Callable[[types.ModuleType], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # one shot; the search below must not come back here
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None:
            return spec
        exec_module = loader.exec_module
        callback = self.callback

        def exec_then_callback(module: types.ModuleType) -> None:
            exec_module(module)
            callback(module)

        loader.exec_module = exec_then_callback  # type: ignore[method-assign]
        return spec


def after_import(name: str, callback: Callable[[types.ModuleType], None]) -> None:
    """``callback(module)`` now if module ``name`` is imported, else right after its import.

    A patch of a module that costs an import nobody asked for (vLLM's Ray executor
    imports Ray: about 1.4 s) waits for vLLM to import it; so does a registration
    for a class vLLM defines only when it imports a backend (``custom_ops/hw_agnostic.py``).
    """
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))


# The classes whose ``shutdown`` is the last thing a dedicated vLLM process runs:
# ``run_engine_core`` and ``WorkerProc.worker_main`` call it in their ``finally``, then
# the process returns from its multiprocessing target and the interpreter finalizes.
EXITING_PROCESS_CLASSES = (
    ("vllm.v1.engine.core", "EngineCoreProc"),
    ("vllm.v1.executor.multiproc_executor", "WorkerProc"),
)


def _end_spawned_processes_like_forked_ones() -> None:
    """After vLLM's orderly teardown of a spawned engine or worker process, skip finalization."""
    for module_name, class_name in EXITING_PROCESS_CLASSES:
        after_import(module_name, functools.partial(_exit_after_shutdown, class_name=class_name))


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


def _reaped_process_is_not_force_killed() -> None:
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


def _engine_exit_grace_in_abort_mode() -> None:
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


def _idle_engine_core_runs_its_signal_handlers() -> None:
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


def _client_threads_end_before_the_interpreter() -> None:
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


def input_fake_mode_for_standalone_compile(
    example_inputs: list[Any],
) -> contextlib.AbstractContextManager:
    """Make ``standalone_compile`` reuse the fake mode of vLLM's example inputs."""
    from unittest.mock import patch

    from torch._subclasses.fake_tensor import FakeTensor

    for x in example_inputs:
        if isinstance(x, FakeTensor):
            mode = x.fake_mode
            return patch.object(
                sys.modules["torch._inductor.standalone_compile"],
                "FakeTensorMode",
                lambda *a, _mode=mode, **kw: _mode,
            )
    return contextlib.nullcontext()


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


def no_gc_during_capture() -> contextlib.AbstractContextManager[None]:
    """No garbage collection while one graph is captured (``gc.collect`` a no-op)."""
    return no_garbage_collection()


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="end_spawned_processes_like_forked_ones",
        why=(
            "an engine stopped on a busy 2-core host was force-killed ('[shutdown] Process "
            "manager: force killing remaining processes', then resource_tracker's leaked "
            "semaphore and shared_memory warnings): vLLM allows the EngineCore process 5 s "
            "from SIGTERM to exit, its worker's exit included, and both processes, spawned "
            "(every template platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn), spent them in "
            "garbage "
            "collection over heaps of 640-790 thousand objects: the model runner's and "
            "cleanup_dist_env_and_memory's explicit gc.collect() (0.4 s each idle, 1.2-1.5 s "
            "busy) and the interpreter's final collections and module teardown (2-3 s idle; "
            "stacks sampled then: the worker's main thread in gc_collect_main with no Python "
            "frame left, the engine's in MultiprocExecutor._ensure_worker_termination). Stock "
            "vLLM CPU does the same. Patched, EngineCoreProc.shutdown and WorkerProc.shutdown, "
            "the last call of their processes, run vLLM's teardown with garbage collection "
            "off and end the process after its exit handlers with os._exit(0) "
            "(process_exit.py), as multiprocessing ends a forked child; only in a "
            "multiprocessing child and only when no exception but SystemExit(0) is on its way "
            "out (a failing process keeps its traceback and status)"
        ),
        upstream=(
            "vllm-project/vllm#48620 (EngineCore SIGTERM teardown runs full-heap GC passes for "
            "seconds; open) and PR #49082 (skip full GC at EngineCore process exit; open); "
            "vLLM 0.32.0 vllm/v1/engine/core.py::run_engine_core freezes the heap after a "
            "clean shutdown for ROCm only (PR #52281)"
        ),
        remove_when=(
            "vLLM skips the garbage collection and finalization of its exiting engine and "
            "worker processes on every platform (#49082 or the like), or its shutdown "
            "budget covers them on a busy host"
        ),
        apply=_end_spawned_processes_like_forked_ones,
        devices=tuple(DEVICE_PACKAGES),
    ),
    Patch(
        name="reaped_process_is_not_force_killed",
        why=(
            "an engine that had exited cleanly in under a second was reported as "
            "'[shutdown] Process manager: force killing remaining processes count=1' and "
            "kill_process_tree was sent to its (gone, possibly reused) pid - in CI's demo log "
            "and the shutdown stress test, 2026-11-27: vLLM's shutdown asks Process.is_alive(), "
            "which polls waitpid; the engine's liveness monitor thread waits on the same child "
            "and reaps it first, the poll gets ECHILD and multiprocessing answers 'alive'. "
            "Patched, vllm.v1.utils.shutdown (and the name vllm.v1.engine.utils imports) sees "
            "each process through ReapedAwareProcess, alive only while its pid exists"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/utils.py::shutdown and "
            "vllm/v1/engine/utils.py::CoreEngineProcManager.monitor_engine_liveness (both "
            "waitpid the engine core); CPython's multiprocessing popen_fork.Popen.poll treats "
            "ECHILD as 'not exited yet'"
        ),
        remove_when=(
            "vLLM's shutdown joins the engine process once (or its liveness monitor stops "
            "reaping), or multiprocessing's poll reports a child another thread reaped as exited"
        ),
        apply=_reaped_process_is_not_force_killed,
        devices=tuple(DEVICE_PACKAGES),
    ),
    Patch(
        name="idle_engine_core_runs_its_signal_handlers",
        why=(
            "about 1 in 60 engine stops on a loaded 2-core host hung for the demo's whole 60 s "
            "window, then vLLM force-killed the EngineCore and its worker (leaking 2 "
            "shared-memory rings and a semaphore). Caught by the shutdown stress loop "
            "(2 of 129 runs, 2026-11-28), stacks and kernel states dumped 3.5 s after "
            "SIGTERM: the EngineCore's main thread idle in _process_input_queue's "
            "input_queue.get(block=True) (a lock wait with no timeout, futex_do_wait), no "
            "signal pending or blocked, and '[shutdown] EngineCore: trigger received signal' "
            "never logged. The C-level handler had run, but the Python handler only runs in "
            "the main thread when it next executes bytecode; that wait is interrupted only "
            "when the main thread itself takes the signal while blocked - not when another "
            "thread takes it, nor when it lands just before the wait begins - and the wakeup "
            "vLLM relies on (SignalCallback putting WAKEUP into the queue) is sent by that "
            "very handler. Patched, each EngineCoreProc's busy loop first makes its input "
            "queue (the same object, vLLM's threads keep it) wait in slices of "
            "IDLE_WAIT_SLICE_S (0.2 s): the pending handler runs within one slice, the busy "
            "loop wakes and shuts down. (Wrapping __init__ instead did nothing: vLLM loads "
            "the plugins, and so applies the patch, inside EngineCore.__init__; 7 hangs in "
            "200 loaded stops showed the plain wait still there)"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/engine/core.py::EngineCoreProc._process_input_queue "
            "(input_queue.get(block=block) without a timeout; run_engine_core's signal_handler "
            "and SignalCallback); CPython python/cpython#85300 (a main thread blocked on a lock "
            "does not run signal handlers when another thread takes the signal). Stock vLLM "
            "has the same wait"
        ),
        remove_when=(
            "vLLM's EngineCore waits for requests with a timeout, wakes its loop without a "
            "Python signal handler (signal.set_wakeup_fd, or a signal-handling thread with "
            "sigwait), or CPython's lock waits run pending handlers"
        ),
        apply=_idle_engine_core_runs_its_signal_handlers,
        devices=tuple(DEVICE_PACKAGES),
    ),
    Patch(
        name="engine_exit_grace_in_abort_mode",
        why=(
            "SIGINT or SIGTERM to vllm serve (shutdown_timeout 0, vLLM's default: abort "
            "in-flight requests) made the API server's process manager SIGTERM the "
            "EngineCore and force-kill it in the same instant (a 0 s budget: 'force killing "
            "remaining processes', leaked semaphore and shared_memory warnings), before the "
            "engine could send the aborted requests' final outputs: 16 streams in flight "
            "then hung, and uvicorn waited for their connections, so the server did not "
            "exit until the clients gave up. Patched, the zero/zero case gets vLLM's generic "
            "5 s process grace; the engine aborts the requests (their streams end), and on "
            "the template platform exits within about a second "
            "(end_spawned_processes_like_forked_ones)"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/engine/utils.py::get_engine_process_shutdown_timeout gives "
            "that grace (15 s) on ROCm only (PR #52281); called by CoreEngineProcManager."
            "shutdown through the module global"
        ),
        remove_when="vLLM gives the EngineCore a cleanup grace in abort mode on every platform",
        apply=_engine_exit_grace_in_abort_mode,
        devices=tuple(DEVICE_PACKAGES),
    ),
    Patch(
        name="client_threads_end_before_the_interpreter",
        why=(
            "an embedding script (vllm.LLM, runner='pooling') printed its answer, stopped its "
            "engine cleanly, then died at interpreter exit with 'terminate called without an "
            "active exception' (SIGABRT): 2 of 3 runs on an Intel host without AVX-512 BF16, "
            "1 of 2 here under load (2026-11-28), stock vLLM CPU as well. The core dump: "
            "the sync client's daemon output thread, ending while the main thread was already "
            "in Py_FinalizeEx, freed its last decoded outputs - a pooling output is a torch "
            "view tensor - whose ~TensorImpl decrefs a PyObject under pybind11's "
            "gil_scoped_acquire; taking the GIL during finalization makes CPython call "
            "pthread_exit, and its forced unwind through that noexcept destructor is "
            "std::terminate. vLLM's sync shutdown sends the output thread its stop signal "
            "but never joins it, and at exit the engine manager's finalizer, the liveness "
            "monitor thread and the client's finalizer race. Patched, each SyncMPClient "
            "registers an exit handler that runs before vLLM's finalizers: in the main "
            "thread it shuts the client down (a no-op if that ran) and joins the output "
            "thread (OUTPUT_THREAD_JOIN_S at most), so the outputs are freed while the "
            "interpreter is whole. Any output holding a tensor can do it: prompt logprobs too"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/engine/core_client.py (BackgroundResources.__call__ signals "
            "SyncMPClient's EngineCoreOutputQueueThread and returns; start_engine_core_monitor's "
            "daemon thread shuts the client down); pytorch/pytorch#38228 (torch's pybind11 GIL "
            "guards abort a daemon thread at exit: this message; open); CPython "
            "python/cpython#87135 (a thread taking the GIL during finalization is "
            "pthread_exit-ed; Python 3.14 hangs it instead, PR #105805)"
        ),
        remove_when=(
            "vLLM joins the sync client's output thread on shutdown (or makes it drop its "
            "outputs before waiting), or the supported Pythons no longer pthread_exit a "
            "thread at finalization (the feature tests' stock exit test then fails)"
        ),
        apply=_client_threads_end_before_the_interpreter,
        devices=tuple(DEVICE_PACKAGES),
    ),
    Patch(
        name="standalone_compile_input_fake_mode",
        why=(
            "torch._inductor.standalone_compile creates its own FakeTensorMode, which "
            "rejects vLLM's example inputs (fake tensors of another mode); the compiler "
            "rebinds standalone_compile.FakeTensorMode for the one call so it reuses theirs"
        ),
        upstream=(
            "pytorch#176562; vLLM's InductorStandaloneAdaptor "
            "(vllm/compilation/compiler_interface.py) applies the same workaround"
        ),
        remove_when="standalone_compile accepts inputs that carry their own fake mode",
        devices=tuple(DEVICE_PACKAGES),
        scope="call",
        caller="compiler/compiler.py::TemplateCompiler._aot_eager (fusion_only, fallback)",
    ),
    Patch(
        name="gc_collect_off_during_capture",
        why=(
            "torch.cuda.graph() runs gc.collect() when it starts a capture; pieces are "
            "captured back to back, and a full collection per piece makes capture slow. "
            "gc.collect is a no-op (and gc disabled) while one graph is captured"
        ),
        upstream=(
            "vLLM's CUDAGraphWrapper (vllm/compilation/cuda_graph.py) patches gc.collect "
            "the same way when CUDAGraphOptions.gc_disable is set"
        ),
        remove_when="torch's graph capture stops collecting garbage, or offers a flag for it",
        devices=tuple(DEVICE_PACKAGES),
        scope="call",
        caller="graph_wrapper/wrapper.py::TemplateGraphWrapper._capture (gc_disable)",
    ),
)


@functools.cache
def all_patches() -> tuple[Patch, ...]:
    """The whole registry: :data:`PATCHES`, then each device folder's ``patches.PATCHES``
    (the folders of ``settings.DEVICE_PACKAGES`` that have a ``patches`` module)."""
    entries = list(PATCHES)
    for package in DEVICE_PACKAGES.values():
        if importlib.util.find_spec(f"{package}.patches") is not None:
            entries += importlib.import_module(f"{package}.patches").PATCHES
    return tuple(entries)


def apply_patch(name: str) -> None:
    """Apply one process patch of the registry by name (idempotent)."""
    patch = next(p for p in all_patches() if p.name == name)
    assert patch.scope == "process" and patch.apply is not None, name
    patch.apply()


def apply_patches(device: str) -> list[str]:
    """Apply the registry's process patches for ``device``; returns their names."""
    applied = []
    for patch in all_patches():
        if patch.scope == "process" and patch.apply is not None and device in patch.devices:
            patch.apply()
            applied.append(patch.name)
    return applied

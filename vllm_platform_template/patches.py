"""The registry of every rebinding of a vLLM or torch object (vLLM 0.32 and 0.33).

Where vLLM leaves no hook, the plugin changes a vLLM or torch object, and every
such change is registered, nowhere else: a :class:`Patch` entry says why it
exists, the upstream reference and when to remove it. The registry
(:func:`all_patches`) is this module's :data:`PATCHES`, the ones every device
needs (process exit, compilation, graph capture, structured output's bitmask on a
device Inductor has no backend for), and each device folder's
``devices/<name>/patches.py`` (its ``PATCHES``, with their code): a device's
patches travel with its folder. Two kinds:

- process patches (``scope="process"``) are applied per process from the
  ``vllm.general_plugins`` entry point (only while the template platform is
  active) by :func:`apply_patches`, and are idempotent; a platform may apply
  one earlier, by name (:func:`apply_patch`), when vLLM makes it current;
- scoped patches (``scope="call"``) rebind an object for one call or one
  instance; the function that does it lives beside its entry and the listed caller
  calls it.

The code of the shutdown and signal patches is ``shutdown.py``'s (its functions
are named after their entries); a patch waits for vLLM's import of what it
changes through ``after_import.py``. This module imports nothing from the plugin
but the device registry (each device folder's patches module, read by device
type), ``shutdown`` and ``after_import``, so the compiler and the graph wrapper
call it without importing the platform layer.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_platform_template import shutdown
from vllm_platform_template.after_import import after_import
from vllm_platform_template.device_registry import DEVICE_PACKAGES, folder_module


@dataclass(frozen=True)
class Patch:
    name: str
    why: str
    upstream: str
    remove_when: str
    devices: tuple[str, ...] | None = None  # the device types it applies on; None: every one
    scope: str = "process"  # "process": apply_patches; "call": called by `caller`
    apply: Callable[[], None] | None = None
    caller: str = ""


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


def no_gc_during_capture() -> contextlib.AbstractContextManager[None]:
    """No garbage collection while one graph is captured (``gc.collect`` a no-op)."""
    return shutdown.no_garbage_collection()


@functools.cache
def _inductor_generates_code_for(device_type: str) -> bool:
    from torch._inductor.codegen import common

    common.init_backend_registration()
    return common.get_scheduling_for_device(device_type) is not None


def _grammar_bitmask_without_inductor() -> None:
    """Structured output's token bitmask in plain torch on a device Inductor cannot compile for."""
    after_import("xgrammar", _bitmask_in_torch_where_inductor_has_no_backend)


def _bitmask_in_torch_where_inductor_has_no_backend(xgrammar: types.ModuleType) -> None:
    original = xgrammar.apply_token_bitmask_inplace
    if getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def apply_token_bitmask_inplace(logits: Any, bitmask: Any, **kwargs: Any) -> None:
        auto = kwargs.get("backend", "auto") == "auto"
        # xgrammar's own CPU kernel serves the host; any device Inductor compiles for keeps
        # xgrammar's choice
        if auto and not logits.is_cpu and not _inductor_generates_code_for(logits.device.type):
            kwargs["backend"] = "torch_native"
        original(logits, bitmask, **kwargs)

    apply_token_bitmask_inplace.__template_patched__ = True  # type: ignore[attr-defined]
    # vLLM calls it through the package (``xgr.apply_token_bitmask_inplace``)
    setattr(xgrammar, "apply_token_bitmask_inplace", apply_token_bitmask_inplace)  # noqa: B010


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
            "out (a failing process keeps its traceback and status). os._exit skips C++ static "
            "destructors, among them the one of vLLM's CPU communicator (csrc/cpu/shm.cpp) "
            "that unlinks each rank's /dev/shm segment: the patch records the segments a "
            "process created (_CPUSHMDistributed._init_cpu_shm) and unlinks them first "
            "(every TP=2 engine left two 4 MiB segments before)"
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
        apply=shutdown.end_spawned_processes_like_forked_ones,
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
        apply=shutdown.reaped_process_is_not_force_killed,
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
        apply=shutdown.idle_engine_core_runs_its_signal_handlers,
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
        apply=shutdown.engine_exit_grace_in_abort_mode,
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
        apply=shutdown.client_threads_end_before_the_interpreter,
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
        scope="call",
        caller="graph_wrapper/wrapper.py::TemplateGraphWrapper._capture (gc_disable)",
    ),
    Patch(
        name="grammar_bitmask_without_inductor",
        why=(
            "Structured output masks each step's logits with xgrammar's "
            "apply_token_bitmask_inplace, whose 'auto' backend is its CPU kernel on the CPU, "
            "Triton on CUDA and torch.compile on every other device: on a device Inductor has "
            "no backend for (a first-light device), the first structured request kills the "
            "engine (InductorError: KeyError naming the device). Patched, such a device gets "
            "xgrammar's own plain-torch backend ('torch_native'); a device with an Inductor "
            "backend, the CPU and CUDA keep xgrammar's choice."
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/structured_output/utils.py::apply_grammar_bitmask calls "
            "xgr.apply_token_bitmask_inplace without a backend; xgrammar 0.2 "
            "matcher.py::apply_token_bitmask_inplace picks torch_compile for any device type "
            "but cpu, cuda and npu"
        ),
        remove_when=(
            "xgrammar's 'auto' falls back to plain torch where Inductor has no backend, or "
            "vLLM asks the platform for the bitmask backend"
        ),
        apply=_grammar_bitmask_without_inductor,
    ),
)


@functools.cache
def all_patches() -> tuple[Patch, ...]:
    """The whole registry: :data:`PATCHES`, then each device folder's ``patches.PATCHES``
    (the folders of ``device_registry.DEVICE_PACKAGES`` that have a ``patches`` module)."""
    entries = list(PATCHES)
    for device_type in DEVICE_PACKAGES:
        module = folder_module(device_type, "patches", required=False)
        if module is not None:
            entries += module.PATCHES
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
        on_device = patch.devices is None or device in patch.devices
        if patch.scope == "process" and patch.apply is not None and on_device:
            patch.apply()
            applied.append(patch.name)
    return applied

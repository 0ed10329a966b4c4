"""This device folder's entries of the patch registry, and their code.

vLLM hook served: none - vLLM 0.32/0.33 reserves two things a plain-``Platform``
accelerator needs for its in-tree platforms: the device view of pinned host memory
that Model Runner V2's input buffers are read through, and the communicator's
graph-capture context. Each entry says why, the upstream reference and when to
remove it (``patches.Patch``); the registry (``patches.all_patches``) takes
:data:`PATCHES` from this folder, applied by ``apply_patches`` for this folder's
device type. Proven by ``tests/shared/test_patch_registry.py`` (each entry documented,
no rebinding outside a registry module); in the speed tier, by the communicator's
graph-capture test and the engine tests that read pinned buffers on the device.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Iterator
from typing import Any

from vllm_platform_template.after_import import after_import
from vllm_platform_template.devices.gpu.availability import graph_api
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY
from vllm_platform_template.patches import Patch

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
        if capture is not None:
            context = capture(graph_capture_context)
        elif graph_api() == ACCELERATOR_GRAPH:  # vLLM's own context is torch.cuda's
            context = _side_stream_capture(self.device, graph_capture_context)
        else:
            context = original(self, graph_capture_context)
        with context as ctx:
            yield ctx

    graph_capture.__template_patched__ = True  # type: ignore[attr-defined]
    graph_capture.__wrapped_original__ = original  # type: ignore[attr-defined]
    GroupCoordinator.graph_capture = graph_capture  # type: ignore[method-assign]


@contextlib.contextmanager
def _side_stream_capture(device: Any, context: Any = None) -> Iterator[Any]:
    """vLLM's capture context with ``torch.Stream``: a side stream, after the current one."""
    import torch
    from vllm.distributed.parallel_state import GraphCaptureContext

    context = context or GraphCaptureContext(torch.Stream(device=device))  # type: ignore[arg-type]
    context.stream.wait_stream(torch.accelerator.current_stream())
    with context.stream:
        yield context


def _v1_full_graphs_through_the_device() -> None:
    """vLLM's V1 runner captures FULL graphs with the device's graph API (torch.accelerator)."""
    if graph_api() == ACCELERATOR_GRAPH:
        after_import("vllm.v1.worker.gpu_model_runner", _full_graph_wrapper_and_capture_stream)


def _full_graph_wrapper_and_capture_stream(runner_module: types.ModuleType) -> None:
    from vllm.distributed import parallel_state

    from vllm_platform_template.graph_wrapper.full import TemplateFullGraphWrapper

    if getattr(runner_module, "CUDAGraphWrapper", None) is TemplateFullGraphWrapper:
        return

    @contextlib.contextmanager
    def graph_capture(device: Any) -> Iterator[Any]:
        groups = (
            parallel_state.get_tp_group(),
            parallel_state.get_pp_group(),
            parallel_state.get_dp_group(),
        )
        with _side_stream_capture(device) as context, contextlib.ExitStack() as stack:
            for group in groups:
                stack.enter_context(group.graph_capture(context))
            yield context

    graph_capture.__template_patched__ = True  # type: ignore[attr-defined]
    # Both bind the names at import: the runner module is the one that calls them.
    setattr(runner_module, "CUDAGraphWrapper", TemplateFullGraphWrapper)  # noqa: B010
    setattr(runner_module, "graph_capture", graph_capture)  # noqa: B010
    setattr(parallel_state, "graph_capture", graph_capture)  # noqa: B010


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="uva_device_view",
        why=(
            "Model Runner V2 (vLLM's default) keeps its input buffers in pinned host memory "
            "and reads them on the device through get_accelerator_view_from_cpu_tensor, "
            "which serves CUDA/ROCm (vllm._C) and XPU and raises for every out-of-tree "
            "platform ('currently not supported in: cuda'), though the platform says pinned "
            "memory, hence UVA, is available. A template accelerator answers with "
            "TemplateDevice.pinned_device_view "
            "(the GPU folder's views.py, "
            "a zero-copy device view of the pinned tensor, torch only); others keep vLLM's answer."
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
        devices=(IDENTITY.device_type,),
    ),
    Patch(
        name="v1_full_graphs_through_the_device",
        why=(
            "vLLM's V1 runner records whole steps only through CUDAGraphWrapper (torch.cuda "
            "by name, compiled weak_ref_tensor) in a torch.cuda.Stream capture context. "
            "For a torch.accelerator.Graph device: graph_wrapper/full.py and torch.Stream"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/worker/gpu_model_runner.py binds CUDAGraphWrapper and "
            "parallel_state.graph_capture by name; only PIECEWISE asks the platform"
        ),
        remove_when="vLLM's runners capture whole steps through a platform hook",
        apply=_v1_full_graphs_through_the_device,
        devices=(IDENTITY.device_type,),
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
            "provides the context; every other gets vLLM's (torch.cuda's; torch.Stream's "
            "where the graph API is torch.accelerator.Graph)"
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
        devices=(IDENTITY.device_type,),
    ),
)

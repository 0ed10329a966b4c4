"""This device folder's entries of the patch registry, and their code.

vLLM hook served: none - vLLM 0.32/0.33 reserves two things a plain-``Platform``
accelerator needs for its in-tree platforms: the device view of pinned host memory
that Model Runner V2's input buffers are read through, and the communicator's
graph-capture context. Each entry says why, the upstream reference and when to
remove it (``patches.Patch``); the registry (``patches.all_patches``) takes
:data:`PATCHES` from this folder, applied by ``apply_patches`` for this folder's
device type. Proven by ``tests/unit/test_patch_registry.py`` (each entry documented,
no rebinding outside a registry module); in the speed tier, by the communicator's
graph-capture test and the engine tests that read pinned buffers on the device.
"""

from __future__ import annotations

import contextlib
import functools

from vllm_platform_template.devices.gpu.identity import IDENTITY
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
        context = original if capture is None else lambda _self, ctx: capture(ctx)
        with context(self, graph_capture_context) as ctx:
            yield ctx

    graph_capture.__template_patched__ = True  # type: ignore[attr-defined]
    graph_capture.__wrapped_original__ = original  # type: ignore[attr-defined]
    GroupCoordinator.graph_capture = graph_capture  # type: ignore[method-assign]


PATCHES: tuple[Patch, ...] = (
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
        devices=(IDENTITY.device_type,),
    ),
)

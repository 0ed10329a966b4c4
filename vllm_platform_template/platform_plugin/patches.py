"""The registry of patches to vLLM 0.32.0 that no platform hook can replace.

Every entry says why it exists, the upstream reference, and when to remove it.
Patches are applied per process from the ``vllm.general_plugins`` entry point
(only while the template platform is active) and are idempotent. Nothing else
in the plugin modifies vLLM or torch objects.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from vllm_platform_template.log import get_logger

logger = get_logger(__name__)


@dataclass(frozen=True)
class Patch:
    name: str
    why: str
    upstream: str
    remove_when: str
    apply: Callable[[], None]
    devices: tuple[str, ...]


def _quiet_accelerator_cleanup() -> None:
    """Let ``cleanup_dist_env_and_memory`` finish on a CPU-backed OOT platform."""
    import vllm.v1.engine.core as engine_core

    original = engine_core.cleanup_dist_env_and_memory
    if getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def cleanup_dist_env_and_memory(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except RuntimeError as e:
            # Raised by torch.accelerator.empty_cache() after the distributed
            # state was already torn down; there is no accelerator cache to free.
            if "accelerator" not in str(e):
                raise
            logger.debug("ignored accelerator cleanup on the CPU backend: %s", e)

    cleanup_dist_env_and_memory.__template_patched__ = True  # type: ignore[attr-defined]
    engine_core.cleanup_dist_env_and_memory = cleanup_dist_env_and_memory


# vLLM modules that bind ``get_accelerator_view_from_cpu_tensor`` by name at import.
_UVA_VIEW_USERS = (
    "vllm.utils.torch_utils",
    "vllm.v1.worker.gpu.buffer_utils",
    "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.offloader.uva",
)


def _uva_device_view() -> None:
    """Give vLLM's pinned-memory device views to the template GPU platform."""
    import importlib

    import vllm.utils.torch_utils as torch_utils

    from vllm_platform_template.kernels.cuda_uva import cuda_view_of_pinned

    original = torch_utils.get_accelerator_view_from_cpu_tensor
    if getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def get_accelerator_view_from_cpu_tensor(cpu_tensor):
        from vllm.platforms import current_platform

        if current_platform.is_out_of_tree() and current_platform.device_type == "cuda":
            return cuda_view_of_pinned(cpu_tensor)
        return original(cpu_tensor)

    get_accelerator_view_from_cpu_tensor.__template_patched__ = True  # type: ignore[attr-defined]
    for name in _UVA_VIEW_USERS:
        module = importlib.import_module(name)
        if hasattr(module, "get_accelerator_view_from_cpu_tensor"):
            setattr(  # noqa: B010  (the rebinding is this patch)
                module, "get_accelerator_view_from_cpu_tensor", get_accelerator_view_from_cpu_tensor
            )


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="engine_core_accelerator_cleanup",
        why=(
            "vllm/distributed/parallel_state.py::cleanup_dist_env_and_memory calls "
            "torch.accelerator.empty_cache() whenever not current_platform.is_cpu(); an "
            "out-of-tree platform backed by the CPU is not is_cpu(), so the EngineCore "
            "process prints 'RuntimeError: Cannot access accelerator device when none is "
            "available' at every shutdown. CPUModelRunner silences this only in the worker."
        ),
        upstream=(
            "vLLM 0.32.0 has no platform hook for the cleanup (e.g. Platform.empty_cache); "
            "the call site is in v1/engine/core.py::EngineCore.shutdown"
        ),
        remove_when=(
            "vLLM asks the platform (not is_cpu()) whether an accelerator cache exists, "
            "or torch.accelerator.empty_cache() becomes a no-op without an accelerator"
        ),
        apply=_quiet_accelerator_cleanup,
        devices=("cpu",),
    ),
    Patch(
        name="uva_device_view",
        why=(
            "Model Runner V2 (vLLM's default) keeps its input buffers in pinned host memory "
            "and reads them on the device through get_accelerator_view_from_cpu_tensor, "
            "which serves CUDA/ROCm (vllm._C) and XPU and raises for every out-of-tree "
            "platform ('currently not supported in: cuda'), though the platform says pinned "
            "memory, hence UVA, is available. The template GPU platform answers with "
            "kernels/cuda_uva.py (a zero-copy CUDA view of the pinned tensor, torch only)."
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
        devices=("cuda",),
    ),
)


def apply_patches(device: str) -> list[str]:
    """Apply the registry's patches for ``device``; returns their names."""
    applied = []
    for patch in PATCHES:
        if device in patch.devices:
            patch.apply()
            applied.append(patch.name)
    return applied

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
)


def apply_patches(device: str) -> list[str]:
    """Apply the registry's patches for ``device``; returns their names."""
    applied = []
    for patch in PATCHES:
        if device in patch.devices:
            patch.apply()
            applied.append(patch.name)
    return applied

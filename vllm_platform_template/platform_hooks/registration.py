"""Per-process registrations, run from the ``vllm.general_plugins`` entry point.

vLLM loads general plugins in every process (front end, engine core, each
worker) before it builds models; registrations that live in process-global
registries therefore belong here: the registry's process patches, the
attention backend, the eager CustomOps (the MoE method among them), the W8A8
INT8 linear kernel and the compressed-tensors config whose INT8 experts run on the
plugin's MoE method. (The IR providers are registered
by the platform's ``import_ir_kernels`` hook, which imports ``ir_impls``.)
"""

from __future__ import annotations

from vllm_platform_template.log import get_logger

logger = get_logger(__name__)

_registered: set[str] = set()


def register_all(device: str) -> None:
    """Register everything the ``device`` platform needs in this process (idempotent)."""
    if device in _registered:
        return
    _registered.add(device)
    from vllm_platform_template.attention.registration import register_attention_backend
    from vllm_platform_template.custom_ops import register_custom_ops
    from vllm_platform_template.patches import apply_patches
    from vllm_platform_template.quantization.compressed_tensors_config import (
        register_compressed_tensors_config,
    )
    from vllm_platform_template.quantization.int8_linear import register_int8_linear_kernel

    applied = apply_patches(device)
    register_custom_ops()
    register_attention_backend()
    register_int8_linear_kernel()
    register_compressed_tensors_config()
    logger.debug("template plugin registered for %s; patches: %s", device, applied)

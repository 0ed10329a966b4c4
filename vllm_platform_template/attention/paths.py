"""Which kernels the ``TEMPLATE_ATTN`` backend runs: one path per engine.

vLLM hook served: none directly; the metadata builder
(``AttentionMetadataBuilder.__init__``) and the attention impl
(``AttentionImpl.do_kv_cache_update``/``forward``) both resolve the path here from
the same inputs, so the cache writer and the reader always agree - the CPU
kernels' cache layout is not the reference's, and mixing them reads garbage.

The plugin option ``additional_config["template"]["attention"]`` picks:

- ``"auto"`` (default): CPU -> vLLM's CPU kernels when loaded and the
  configuration is one they serve, else the reference; CUDA -> Triton; any
  other device -> the reference.
- ``"reference"``: the plain-torch reference everywhere (slow; for bring-up and
  for checking a new kernel against the spec).
"""

from __future__ import annotations

import functools

import torch

from vllm_platform_template.kernels.paged_attention import cpu as cpu_kernels
from vllm_platform_template.log import get_logger

logger = get_logger(__name__)

CPU_KERNELS = "cpu_kernels"
REFERENCE = "reference"
TRITON = "triton"
PATHS = (CPU_KERNELS, REFERENCE, TRITON)
REQUESTS = ("auto", "reference")


def select_attention_path(device_type: str, requested: str, cpu_kernels_available: bool) -> str:
    """``"cpu_kernels"``, ``"reference"`` or ``"triton"`` for a device and a request.

    ``cpu_kernels_available``: vLLM's CPU ops are loaded *and* serve the layer's
    dtype, block size and head size.
    """
    if requested not in REQUESTS:
        raise ValueError(f"template attention must be one of {REQUESTS}, got {requested!r}")
    if requested == "reference":
        return REFERENCE
    if device_type == "cpu":
        return CPU_KERNELS if cpu_kernels_available else REFERENCE
    if device_type == "cuda":
        return TRITON
    return REFERENCE


@functools.cache
def resolve_attention_path(
    device_type: str, requested: str, dtype: torch.dtype, block_size: int, head_size: int
) -> str:
    """:func:`select_attention_path` with the CPU-kernel checks done; logs the choice once."""
    reason = ""
    usable = False
    if device_type == "cpu" and requested == "auto":
        usable, reason = cpu_kernels.available()
        if usable:
            problem = cpu_kernels.config_problem(dtype, block_size, head_size)
            usable, reason = problem is None, problem or reason
    path = select_attention_path(device_type, requested, usable)
    if device_type == "cpu" and requested == "auto" and path == REFERENCE:
        logger.warning(
            "TEMPLATE_ATTN: vLLM's CPU attention kernels cannot be used (%s); running the "
            "plain-torch reference, which is much slower",
            reason,
        )
    elif path == REFERENCE and requested == "auto":
        logger.warning(
            "TEMPLATE_ATTN: no attention kernels for device type %r; running the plain-torch "
            "reference",
            device_type,
        )
    logger.info(
        "TEMPLATE_ATTN path %s (device %s, attention=%s, dtype %s, block_size %d, head_size %d)",
        path,
        device_type,
        requested,
        str(dtype).removeprefix("torch."),
        block_size,
        head_size,
    )
    return path

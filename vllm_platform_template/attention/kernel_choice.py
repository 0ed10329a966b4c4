"""Which kernels the ``TEMPLATE_ATTN`` backend runs: one set per engine.

vLLM hook served: none directly; the metadata builder
(``AttentionMetadataBuilder.__init__``) and the attention impl
(``AttentionImpl.do_kv_cache_update``/``forward``) both resolve the kernels here
from the same inputs, so the cache writer and the reader always agree - a
device's cache layout need not be the reference's, and mixing them reads garbage.

The plugin option ``additional_config["template"]["attention"]`` picks:

- ``"auto"`` (default): the device's attention kernels (``TemplateDevice.attention``:
  each device folder's, e.g. vLLM's CPU kernels on the CPU) when they can serve the
  layer in this process, else the plain-torch reference, with a warning;
- ``"reference"``: the plain-torch reference everywhere (slow; for bring-up and
  for checking a new kernel against the spec).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from vllm_platform_template.device import AttentionKernels, device_for
from vllm_platform_template.log import get_logger
from vllm_platform_template.reference_kernels.paged_attention.reference import (
    ReferenceAttentionKernels,
)
from vllm_platform_template.settings import ATTENTION_REQUESTS, options_of

logger = get_logger(__name__)

REFERENCE: AttentionKernels = ReferenceAttentionKernels()


@functools.cache
def resolve_attention_kernels(
    device_type: str, requested: str, dtype: torch.dtype, block_size: int, head_size: int
) -> AttentionKernels:
    """The kernels for a layer's cache on ``device_type``; logs the choice once."""
    if requested not in ATTENTION_REQUESTS:
        raise ValueError(
            f"template attention must be one of {ATTENTION_REQUESTS}, got {requested!r}"
        )
    kernels = REFERENCE
    if requested == "auto":
        device = device_for(device_type)
        usable, why = device.kernels_status() if device is not None else (False, "")
        device_kernels = device.attention() if device is not None and usable else None
        if device_kernels is not None:
            problem = device_kernels.config_problem(dtype, block_size, head_size)
        elif device is not None and not usable:
            problem = why
        else:
            problem = f"no attention kernels for device type {device_type!r}"
        if device_kernels is not None and problem is None:
            kernels = device_kernels
        else:
            logger.warning(
                "TEMPLATE_ATTN: the device's attention kernels cannot be used (%s); running "
                "the plain-torch reference, which is much slower",
                problem,
            )
    logger.info(
        "TEMPLATE_ATTN path %s (device %s, attention=%s, dtype %s, block_size %d, head_size %d)",
        kernels.name,
        device_type,
        requested,
        str(dtype).removeprefix("torch."),
        block_size,
        head_size,
    )
    return kernels


def engine_attention_kernels(vllm_config: Any, device_type: str) -> AttentionKernels | None:
    """The kernels this engine's attention layers will resolve, known from its config:
    the model's dtype (the cache's: ``TEMPLATE_ATTN`` takes kv_cache_dtype "auto" only),
    the cache's block size and the model's head size. None while the config does not
    say (no model, or no block size yet)."""
    model_config = vllm_config.model_config
    block_size = vllm_config.cache_config.block_size
    if model_config is None or block_size is None:
        return None
    return resolve_attention_kernels(
        device_type,
        options_of(vllm_config).attention,
        model_config.dtype,
        block_size,
        model_config.get_head_size(),
    )

"""The ``TEMPLATE_ATTN`` attention backend class: what it supports and where its parts are.

vLLM hook served: the qualname returned by ``Platform.get_attn_backend_cls`` is
resolved to this class; vLLM reads its capabilities (dtypes, block and head
sizes, KV layout, features) and builds the layer's impl and metadata builder
from ``get_impl_cls``/``get_builder_cls``. Whether a layer can run on it
(``validate_configuration``) is asked by the template platform's
``get_attn_backend_cls`` (``registration.attention_backend_qualname``): vLLM's
selector leaves that to the platform. ``get_name()`` must be an
``AttentionBackendEnum`` member (``Attention.__init__`` looks it up), which
``registration.register_attention_backend`` arranges.

Capabilities are those every kernel path serves (the reference and each
device's kernels): causal decoder attention, grouped-query heads, unquantized KV cache.
Everything else keeps the base class's ``False``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from vllm.v1.attention.backend import AttentionBackend, MultipleOf
from vllm.v1.kv_cache_interface import KVCacheLayout

from vllm_platform_template.attention.impl import TemplateAttentionImpl
from vllm_platform_template.attention.metadata import (
    TemplateAttentionMetadata,
    TemplateAttentionMetadataBuilder,
)
from vllm_platform_template.device import device_for
from vllm_platform_template.settings import ATTENTION_BACKEND_NAME

if TYPE_CHECKING:
    from vllm.config.cache import CacheDType
    from vllm.v1.kv_cache_interface import KVCacheSpec

__all__ = [
    "TemplateAttentionBackend",
    "TemplateAttentionImpl",
    "TemplateAttentionMetadata",
    "TemplateAttentionMetadataBuilder",
]


class TemplateAttentionBackend(AttentionBackend):
    """Paged causal attention over an LBHNC KV cache, KV write as a separate op."""

    # vLLM calls impl.do_kv_cache_update (its own graph-split op) before forward.
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [
        torch.float16,
        torch.bfloat16,
        torch.float32,
    ]
    supported_kv_cache_dtypes: ClassVar[list[CacheDType]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return ATTENTION_BACKEND_NAME

    @staticmethod
    def get_impl_cls() -> type[TemplateAttentionImpl]:
        return TemplateAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[TemplateAttentionMetadataBuilder]:
        return TemplateAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes(
        kv_cache_spec: KVCacheSpec | None = None,
    ) -> list[int | MultipleOf]:
        # vLLM's CPU kernels take multiples of 16 (the "vec16" ISA below 32; Arm
        # needs 32, where the CPU path falls back to the reference).
        return [MultipleOf(16)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        """The current device's attention kernels' head sizes (empty: any, as the reference's
        on a platform without template device, ``attention/kernel_choice.py``)."""
        from vllm.platforms import current_platform

        device = device_for(current_platform.device_type)
        kernels = device.attention() if device is not None else None
        return list(kernels.head_sizes) if kernels is not None else []

    @classmethod
    def supported_kv_cache_layouts(cls) -> tuple[KVCacheLayout, ...]:
        # The layout reference_kernels/paged_attention/contract.py states.
        return (KVCacheLayout.LBHNC,)

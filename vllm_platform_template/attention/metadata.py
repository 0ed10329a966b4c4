"""Per-step attention metadata of ``TEMPLATE_ATTN`` and its builder.

vLLM hook served: ``AttentionBackend.get_builder_cls()``. The model runner builds
one ``TemplateAttentionMetadataBuilder`` per KV-cache group and calls
``build(common_prefix_len, common_attn_metadata)`` once per step; every layer of
the group then receives the same ``TemplateAttentionMetadata`` in
``AttentionImpl.forward``.

The builder copies the batch tensors the kernels need out of vLLM's
``CommonAttentionMetadata`` and has the kernels prepare their per-step state
(``AttentionKernels.prepare``: vLLM's CPU kernels compute their work split
there), once per step instead of once per layer. It holds
layer-independent state only and never touches the layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from vllm.v1.attention.backend import (
    AttentionCGSupport,
    AttentionMetadata,
    AttentionMetadataBuilder,
    CommonAttentionMetadata,
)
from vllm.v1.attention.backends.utils import get_num_attention_heads_from_layers

from vllm_platform_template.attention.paths import resolve_attention_kernels
from vllm_platform_template.settings import parse_options

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import AttentionSpec


@dataclass
class TemplateAttentionMetadata(AttentionMetadata):
    """What ``TemplateAttentionImpl.forward`` reads for one step."""

    path: str
    """Name of the kernels the builder resolved (``paths``); the impl checks it agrees."""
    num_actual_tokens: int
    """Tokens to attend for (query/output rows after it are padding)."""
    max_query_len: int
    max_seq_len: int
    query_start_loc: torch.Tensor
    """int32 ``[num_reqs + 1]``."""
    seq_lens: torch.Tensor
    """int32 ``[num_reqs]``: context plus new tokens, all already in the cache."""
    block_table: torch.Tensor
    """int32 ``[num_reqs, max_blocks_per_req]``."""
    slot_mapping: torch.Tensor
    """int64 ``[num_tokens]``, ``-1`` for padding."""
    prepared: Any = None
    """The kernels' per-step state (``AttentionKernels.prepare``: e.g. the work split of
    vLLM's CPU kernels), built once per step and shared by the step's layers."""


class TemplateAttentionMetadataBuilder(AttentionMetadataBuilder[TemplateAttentionMetadata]):
    """Builds ``TemplateAttentionMetadata`` from ``CommonAttentionMetadata``."""

    # Attention runs eagerly between captured pieces (PIECEWISE graphs).
    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.NEVER

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        layer_names: list[str],
        vllm_config: VllmConfig,
        device: torch.device,
    ) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        model_config = vllm_config.model_config
        self.num_kv_heads: int = kv_cache_spec.num_kv_heads
        self.head_size: int = kv_cache_spec.head_size
        self.block_size: int = kv_cache_spec.block_size
        # kv_cache_dtype "auto": the cache dtype is the model (query) dtype, and it
        # is what the impl sees on the cache tensor - same inputs, same path.
        self.dtype: torch.dtype = kv_cache_spec.dtype
        # Kernels may size per-step state from the query heads of this
        # group's layers (they may differ from the model-wide count).
        self.num_heads: int = get_num_attention_heads_from_layers(
            vllm_config, layer_names
        ) or model_config.get_num_attention_heads(vllm_config.parallel_config)
        requested = parse_options(vllm_config.additional_config).attention
        self.kernels = resolve_attention_kernels(
            torch.device(device).type, requested, self.dtype, self.block_size, self.head_size
        )

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> TemplateAttentionMetadata:
        cm = common_attn_metadata
        if cm.causal is not True:
            raise NotImplementedError(
                "TEMPLATE_ATTN supports causal decoder attention only; this batch asks for "
                "non-causal or per-request causality"
            )
        prepared = self.kernels.prepare(
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_size=self.head_size,
            dtype=self.dtype,
            block_size=self.block_size,
            seq_lens=cm.seq_lens,
            query_start_loc=cm.query_start_loc,
        )
        return TemplateAttentionMetadata(
            path=self.kernels.name,
            num_actual_tokens=cm.num_actual_tokens,
            max_query_len=cm.max_query_len,
            max_seq_len=cm.max_seq_len,
            query_start_loc=cm.query_start_loc,
            seq_lens=cm.seq_lens,
            block_table=cm.block_table_tensor,
            slot_mapping=cm.slot_mapping,
            prepared=prepared,
        )

"""Per-step attention metadata of ``TEMPLATE_ATTN`` and its builder.

vLLM hook served: ``AttentionBackend.get_builder_cls()``. The model runner builds
one ``TemplateAttentionMetadataBuilder`` per KV-cache group and calls
``build(common_prefix_len, common_attn_metadata)`` once per step; every layer of
the group then receives the same ``TemplateAttentionMetadata`` in
``AttentionImpl.forward``.

The builder hands the kernels vLLM's own batch tensors from
``CommonAttentionMetadata`` (the model runner's persistent buffers, which a
captured graph reads again at every replay; nothing is copied) and asks the
kernels' planner (``AttentionKernels.planner``, one per KV-cache group, made
here) for the step's plan, once per step instead of once per layer: a launch
plan cached per batch shape for compiled kernels, the work split of vLLM's
CPU kernels. It holds layer-independent state only and never touches the layers.

Graph support (``get_cudagraph_support``) is the kernels': kernels that read
every per-step value on the device and plan from the batch shape alone
(``AttentionKernels.full_graphs``) let FULL graphs hold single-token decode
steps (``UNIFORM_SINGLE_TOKEN_DECODE``: vLLM then captures decode batches whole
and runs mixed batches piecewise); the others run between captured pieces only
(``NEVER``). ``build`` allocates nothing, copies nothing to the host and never
calls ``.item()``, so the same code serves eager steps, capture and replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from vllm.v1.attention.backend import (
    AttentionCGSupport,
    AttentionMetadata,
    AttentionMetadataBuilder,
    CommonAttentionMetadata,
)
from vllm.v1.attention.backends.utils import get_num_attention_heads_from_layers
from vllm.v1.kv_cache_interface import AttentionSpec

from vllm_platform_template.attention.kernel_choice import resolve_attention_kernels
from vllm_platform_template.device import AttentionKernels, AttentionPlanner
from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout
from vllm_platform_template.settings import options_of

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheSpec


@dataclass
class TemplateAttentionMetadata(AttentionMetadata):
    """What ``TemplateAttentionImpl.forward`` reads for one step."""

    kernels: AttentionKernels
    """The kernels the builder resolved for this KV-cache group (``kernel_choice``): the impl
    attends with them."""
    num_actual_tokens: int
    """Tokens to attend for (query/output rows after it are padding)."""
    query_start_loc: torch.Tensor
    """int32 ``[num_reqs + 1]``."""
    seq_lens: torch.Tensor
    """int32 ``[num_reqs]``: context plus new tokens, all already in the cache."""
    block_table: torch.Tensor
    """int32 ``[num_reqs, max_blocks_per_req]``."""
    slot_mapping: torch.Tensor
    """int64 ``[num_tokens]``, ``-1`` for padding."""
    plan: Any = None
    """The kernels' per-step state (``AttentionPlanner.plan``: the launch plan of the
    batch shape, or the work split of vLLM's CPU kernels), shared by the step's layers."""


def _graph_support(kernels: AttentionKernels) -> AttentionCGSupport:
    return (
        AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE
        if kernels.full_graphs
        else AttentionCGSupport.NEVER
    )


class TemplateAttentionMetadataBuilder(AttentionMetadataBuilder[TemplateAttentionMetadata]):
    """Builds ``TemplateAttentionMetadata`` from ``CommonAttentionMetadata``."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        layer_names: list[str],
        vllm_config: VllmConfig,
        device: torch.device,
    ) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        model_config = vllm_config.model_config
        # Kernels may size per-step state from the query heads of this
        # group's layers (they may differ from the model-wide count).
        num_heads = get_num_attention_heads_from_layers(
            vllm_config, layer_names
        ) or model_config.get_num_attention_heads(vllm_config.parallel_config)
        # kv_cache_dtype "auto": the cache dtype is the model (query) dtype, and it
        # is what the impl sees on the cache tensor - same inputs, same path.
        self.layout = AttentionLayout(
            num_heads=num_heads,
            num_kv_heads=kv_cache_spec.num_kv_heads,
            head_size=kv_cache_spec.head_size,
            dtype=kv_cache_spec.dtype,
            block_size=kv_cache_spec.block_size,
        )
        self.kernels = _kernels_for(vllm_config, kv_cache_spec, torch.device(device).type)
        self.planner: AttentionPlanner = self.kernels.planner(
            self.layout, vllm_config.scheduler_config.max_num_seqs, torch.device(device)
        )

    @classmethod
    def get_cudagraph_support(
        cls, vllm_config: VllmConfig, kv_cache_spec: KVCacheSpec
    ) -> AttentionCGSupport:
        """The graphs the kernels serving this cache allow (``AttentionKernels.full_graphs``)."""
        from vllm.platforms import current_platform

        assert isinstance(kv_cache_spec, AttentionSpec), kv_cache_spec
        return _graph_support(
            _kernels_for(vllm_config, kv_cache_spec, current_platform.device_type)
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
        plan = self.planner.plan(
            num_reqs=cm.num_reqs,
            num_tokens=cm.num_actual_tokens,
            max_query_len=cm.max_query_len,
            seq_lens=cm.seq_lens,
            query_start_loc=cm.query_start_loc,
        )
        return TemplateAttentionMetadata(
            kernels=self.kernels,
            num_actual_tokens=cm.num_actual_tokens,
            query_start_loc=cm.query_start_loc,
            seq_lens=cm.seq_lens,
            block_table=cm.block_table_tensor,
            slot_mapping=cm.slot_mapping,
            plan=plan,
        )

    def build_for_cudagraph_capture(
        self, common_attn_metadata: CommonAttentionMetadata
    ) -> TemplateAttentionMetadata:
        """Metadata for a FULL graph: a single-token decode step on kernels that allow it.

        The same as :meth:`build` (the plan depends on the batch shape alone); what a
        FULL graph may hold is refused here with the reason, before a capture would
        bake a host-side value into the graph.
        """
        cm = common_attn_metadata
        if not self.kernels.full_graphs:
            raise RuntimeError(
                f"TEMPLATE_ATTN's {self.kernels.name!r} kernels cannot be captured in a FULL "
                "graph (they read per-step values on the host); run cudagraph_mode=PIECEWISE "
                "or NONE"
            )
        if cm.max_query_len != 1:
            raise RuntimeError(
                "TEMPLATE_ATTN captures FULL graphs of single-token decode steps only "
                f"(UNIFORM_SINGLE_TOKEN_DECODE); this capture asks for queries of up to "
                f"{cm.max_query_len} tokens: use cudagraph_mode=FULL_AND_PIECEWISE or "
                "FULL_DECODE_ONLY"
            )
        return self.build(0, cm)


def _kernels_for(
    vllm_config: VllmConfig, kv_cache_spec: AttentionSpec, device_type: str
) -> AttentionKernels:
    requested = options_of(vllm_config).attention
    return resolve_attention_kernels(
        device_type,
        requested,
        kv_cache_spec.dtype,
        kv_cache_spec.block_size,
        kv_cache_spec.head_size,
    )

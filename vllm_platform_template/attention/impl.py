"""The attention computation of ``TEMPLATE_ATTN``: KV write and paged attention.

vLLM hook served: ``AttentionBackend.get_impl_cls()``. Each ``Attention`` layer
builds one ``TemplateAttentionImpl``. Because the backend declares
``forward_includes_kv_cache_update = False``, vLLM calls
``do_kv_cache_update(layer, key, value, kv_cache, slot_mapping)`` (the
``vllm::unified_kv_cache_update`` op) before ``forward`` (the
``vllm::unified_attention_with_output`` op); both are graph-split points, so
attention runs eagerly between compiled pieces.

Each layer runs the kernels ``kernel_choice`` resolves for its cache: the device's
attention kernels (``TemplateDevice.attention``: the device folder's, loaded on
first use, so an install never imports another device's kernel compiler) or the
plain-torch reference. What is fixed for a cache is decided once, the first
time the layer sees it: the cache is checked against the attention contract
(``reference_kernels/paged_attention/contract.py``), its kernels resolved, its key and
value views split off; the first inputs are checked once too. Every later call
is two unchecked launches (KV write, attention) on the step's plan, which the
metadata builder made once for all layers. Features the kernels do not
implement are rejected when the layer is built, naming the feature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from vllm.config import get_current_vllm_config_or_none
from vllm.v1.attention.backend import AttentionImpl, AttentionLayer, AttentionType

from vllm_platform_template.attention.kernel_choice import resolve_attention_kernels
from vllm_platform_template.attention.metadata import TemplateAttentionMetadata
from vllm_platform_template.device import AttentionKernels
from vllm_platform_template.reference_kernels.paged_attention import contract, reference
from vllm_platform_template.settings import ATTENTION_BACKEND_NAME, options_of


def unsupported_features(
    *,
    alibi_slopes: list[float] | None,
    sliding_window: int | None,
    kv_cache_dtype: str,
    logits_soft_cap: float | None,
    attn_type: str,
    extra_impl_args: dict[str, Any],
) -> list[str]:
    """Names of the requested features ``TEMPLATE_ATTN`` does not implement."""
    problems = []
    if alibi_slopes is not None:
        problems.append("ALiBi slopes")
    if sliding_window is not None:
        problems.append(f"sliding window ({sliding_window})")
    if kv_cache_dtype != "auto":
        problems.append(f"kv_cache_dtype {kv_cache_dtype!r} (only 'auto')")
    if logits_soft_cap:
        problems.append(f"logits soft cap ({logits_soft_cap})")
    if attn_type != AttentionType.DECODER:
        problems.append(f"attention type {attn_type!r} (decoder only)")
    for name, value in extra_impl_args.items():
        if value is not None:
            problems.append("attention sinks" if name == "sinks" else f"argument {name!r}")
    return problems


@dataclass
class LayerCache:
    """What is fixed for one layer's KV cache: its kernels and key/value views."""

    kernels: AttentionKernels
    key_cache: torch.Tensor
    value_cache: torch.Tensor
    layout: contract.AttentionLayout
    writes_checked: bool = False
    reads_checked: bool = False


class TemplateAttentionImpl(AttentionImpl[TemplateAttentionMetadata]):
    """Causal decoder attention over the paged KV cache, grouped-query heads."""

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes: list[float] | None = None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        **extra_impl_args: Any,
    ) -> None:
        problems = unsupported_features(
            alibi_slopes=alibi_slopes,
            sliding_window=sliding_window,
            kv_cache_dtype=kv_cache_dtype,
            logits_soft_cap=logits_soft_cap,
            attn_type=attn_type,
            extra_impl_args=extra_impl_args,
        )
        if problems:
            raise NotImplementedError(
                f"{ATTENTION_BACKEND_NAME} does not support {', '.join(problems)}; run this "
                "model on another attention backend"
            )
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
        if self.num_heads % self.num_kv_heads != 0:
            raise ValueError(
                f"{ATTENTION_BACKEND_NAME}: num_heads ({num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        vllm_config = get_current_vllm_config_or_none()
        self.requested_path: str = options_of(vllm_config).attention

        self._caches: dict[tuple[int, int], LayerCache] = {}

    def layer_cache(self, kv_cache: torch.Tensor) -> LayerCache:
        """This layer's record for ``kv_cache``: checked, resolved and split once.

        Keyed by the cache's address and block count: vLLM's profiling run and the
        real run allocate different caches for the same layer.
        """
        key = (kv_cache.data_ptr(), kv_cache.shape[0])
        cache = self._caches.get(key)
        if cache is None:
            layout = contract.AttentionLayout(
                num_heads=self.num_heads,
                num_kv_heads=self.num_kv_heads,
                head_size=self.head_size,
                dtype=kv_cache.dtype,
                block_size=kv_cache.shape[2] if kv_cache.dim() == 4 else 0,
            )
            contract.check_layer_cache(ATTENTION_BACKEND_NAME, kv_cache, layout)
            key_cache, value_cache = reference.split_kv_cache(kv_cache)
            # The builder resolves from the same inputs: the same kernels.
            kernels = resolve_attention_kernels(
                kv_cache.device.type,
                self.requested_path,
                layout.dtype,
                layout.block_size,
                layout.head_size,
            )
            cache = self._caches[key] = LayerCache(kernels, key_cache, value_cache, layout)
        return cache

    def kernels_for(self, kv_cache: torch.Tensor) -> AttentionKernels:
        """The kernels for this cache: same inputs as the builder's, hence the same answer."""
        return self.layer_cache(kv_cache).kernels

    def do_kv_cache_update(
        self,
        layer: torch.nn.Module,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        """Write this step's keys/values (``[T, Hkv, D]``) into the layer's paged cache."""
        cache = self.layer_cache(kv_cache)
        if not cache.writes_checked:
            contract.check_kv_write(
                ATTENTION_BACKEND_NAME, key, value, cache.key_cache, cache.value_cache, slot_mapping
            )
            cache.writes_checked = True
        cache.kernels.write_kv(key, value, cache.key_cache, cache.value_cache, slot_mapping)

    def forward(
        self,
        layer: AttentionLayer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: TemplateAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attention for ``query`` ``[T, Hq, D]`` into ``output`` ``[T, Hq, D]``.

        ``attn_metadata`` is None in vLLM's profile, warm-up and capture runs:
        nothing to compute. Rows from ``num_actual_tokens`` on are padding.
        """
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError(
                f"{ATTENTION_BACKEND_NAME} does not support fused output quantization"
            )
        if attn_metadata is None:
            return output
        cache = self.layer_cache(kv_cache)
        md = attn_metadata
        if not cache.reads_checked:
            if md.kernels is not cache.kernels:
                raise RuntimeError(
                    f"{ATTENTION_BACKEND_NAME}: the metadata builder chose the {md.kernels.name!r} "
                    f"kernels but this layer's cache was written by {cache.kernels.name!r}; "
                    "builder and layer configs disagree"
                )
            contract.check_layer_inputs(
                ATTENTION_BACKEND_NAME, query, key, value, output, cache.layout
            )
            cache.reads_checked = True
        n = md.num_actual_tokens
        md.kernels.attend(
            query if n == query.shape[0] else query[:n],
            cache.key_cache,
            cache.value_cache,
            output if n == output.shape[0] else output[:n],
            block_table=md.block_table,
            seq_lens=md.seq_lens,
            query_start_loc=md.query_start_loc,
            scale=self.scale,
            plan=md.plan,
            key=key if n == key.shape[0] else key[:n],
            value=value if n == value.shape[0] else value[:n],
        )
        return output

"""Llama for the template device, with hand-fused ops at their call sites.

vLLM hook: ``ModelConfig.model_class_overrides`` maps ``LlamaForCausalLM`` to
:class:`TemplateFusedLlamaForCausalLM` when the user opts in
(``{"template": {"model_impl": "fused"}}``). It loads the same checkpoints as
vLLM's Llama: it reuses vLLM's module layout and weight loading (parallel
linear layers, embeddings, ``load_weights``) and replaces only the forward of
the decoder layer and the attention block, which call the fused ops in
``ops/fused_ops.py``:

- residual add + RMSNorm -> ``add_rms_norm_`` (in place);
- gate/up SiLU-and-multiply -> ``silu_and_mul``;
- rotary embedding + KV-cache write -> ``rope_and_cache_``, then paged
  attention through the layer's ``TEMPLATE_ATTN`` implementation.

It runs without full-graph compilation (``CompilationMode.NONE``, set by the
platform: ``models.use_model_code``): no Dynamo trace and no
compile at start-up.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from vllm.config import VllmConfig
from vllm.model_executor.layers.attention.attention import get_attention_context
from vllm.model_executor.models.llama import (
    LlamaAttention,
    LlamaDecoderLayer,
    LlamaForCausalLM,
)
from vllm.v1.attention.backend import AttentionLayer

from vllm_platform_template.attention.impl import TemplateAttentionImpl
from vllm_platform_template.models.llama.ops import fused_ops


class FusedLlamaAttention(LlamaAttention):
    """QKV projection, fused rope + KV-cache write, paged attention, output projection."""

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        attn_metadata, layer, kv_cache, slot_mapping = get_attention_context(self.attn.layer_name)
        impl = layer.impl
        if not isinstance(impl, TemplateAttentionImpl):
            raise RuntimeError(
                f"the fused Llama writes the KV cache in TEMPLATE_ATTN's layout, but layer "
                f"{self.attn.layer_name} uses {type(impl).__name__}; drop --attention-backend"
            )
        output = torch.empty_like(q)
        if slot_mapping is not None and attn_metadata is not None:
            cos_sin_cache = self.rotary_emb._match_cos_sin_cache_dtype(q)
            fused_ops.rope_and_cache_(
                positions,
                q,
                k,
                v,
                self.head_dim,
                cos_sin_cache,
                self.rotary_emb.is_neox_style,
                kv_cache,
                slot_mapping,
                impl.kernels_for(kv_cache),
            )
            impl.forward(
                cast(AttentionLayer, layer),
                q.view(-1, self.num_heads, self.head_dim),
                k.view(-1, self.num_kv_heads, self.head_dim),
                v.view(-1, self.num_kv_heads, self.head_dim),
                kv_cache,
                attn_metadata,
                output.view(-1, self.num_heads, self.head_dim),
            )
        # else: vLLM's profile/warm-up run - no cache, nothing to attend to.
        out, _ = self.o_proj(output)
        return out


class FusedLlamaDecoderLayer(LlamaDecoderLayer):
    """Pre-norm decoder layer: every norm is the fused residual add + RMSNorm."""

    def __init__(self, vllm_config: VllmConfig, prefix: str = "", config: Any = None) -> None:
        super().__init__(vllm_config, prefix, config, attn_layer_type=FusedLlamaAttention)

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        residual: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        norm_in = self.input_layernorm
        if residual is None:
            # First layer: the residual stream starts here; add zero for one code path.
            residual = torch.zeros_like(hidden_states)
        hidden_states, residual = fused_ops.add_rms_norm_(
            hidden_states, residual, norm_in.weight, norm_in.variance_epsilon
        )
        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states)
        norm_post = self.post_attention_layernorm
        hidden_states, residual = fused_ops.add_rms_norm_(
            hidden_states, residual, norm_post.weight, norm_post.variance_epsilon
        )
        gate_up, _ = self.mlp.gate_up_proj(hidden_states)
        hidden_states, _ = self.mlp.down_proj(fused_ops.silu_and_mul(gate_up))
        return hidden_states, residual


class TemplateFusedLlamaForCausalLM(LlamaForCausalLM):
    """vLLM's ``LlamaForCausalLM`` with :class:`FusedLlamaDecoderLayer` layers."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix, layer_type=FusedLlamaDecoderLayer)

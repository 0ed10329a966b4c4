"""``RotaryEmbedding`` on the template platform: ``forward_oot`` rotates in place on device.

Only the base ``RotaryEmbedding`` class is replaced (vLLM's OOT registry is
keyed by class name); scaled variants keep their own ``forward_oot`` (native).
"""

from __future__ import annotations

import torch
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

from vllm_platform_template.kernels import cpu as cpu_kernels


@RotaryEmbedding.register_oot
class TemplateRotaryEmbedding(RotaryEmbedding):
    """Neox/GPT-J rotary embedding applied in place by the device kernel."""

    def forward_oot(
        self,
        positions: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        cos_sin_cache = self._match_cos_sin_cache_dtype(query)
        if query.is_cuda:
            from vllm_platform_template.kernels.triton.rotary import rotary_embedding_

            rotary_embedding_(
                positions, query, key, self.head_size, cos_sin_cache, self.is_neox_style
            )
            return query, key
        if cpu_kernels.vllm_cpu_op("rotary_embedding") is None:
            return self.forward_native(positions, query, key)
        cpu_kernels.rotary_embedding_(
            positions, query, key, self.head_size, cos_sin_cache, self.is_neox_style
        )
        return query, key

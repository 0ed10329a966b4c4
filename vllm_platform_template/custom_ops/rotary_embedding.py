"""``RotaryEmbedding`` on the template platform: ``forward_oot`` rotates in place on device.

Only the base ``RotaryEmbedding`` class is replaced (vLLM's OOT registry is
keyed by class name); scaled variants keep their own ``forward_oot`` (native).
"""

from __future__ import annotations

import torch
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

from vllm_platform_template.custom_ops.kernel_table import platform_kernel_table


@RotaryEmbedding.register_oot
class TemplateRotaryEmbedding(RotaryEmbedding):
    """Neox/GPT-J rotary embedding applied in place by the device kernel."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.kernels = platform_kernel_table()  # once: forward_oot may be traced

    def forward_oot(
        self,
        positions: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        table = self.kernels
        if table is None or table.rotary_embedding_ is None or not table.rotary_ready():
            return self.forward_native(positions, query, key)
        cos_sin_cache = self._match_cos_sin_cache_dtype(query)
        table.rotary_embedding_(
            positions, query, key, self.head_size, cos_sin_cache, self.is_neox_style
        )
        return query, key

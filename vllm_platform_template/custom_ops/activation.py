"""``SiluAndMul`` on the template platform: ``forward_oot`` calls the device's fused kernel."""

from __future__ import annotations

import torch
from vllm.model_executor.layers.activation import SiluAndMul

from vllm_platform_template.device import kernel_table


@SiluAndMul.register_oot
class TemplateSiluAndMul(SiluAndMul):
    """SwiGLU activation through the device kernel (one pass over the gate/up halves)."""

    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        table = kernel_table(x.device.type)
        if table is None or table.silu_and_mul is None:
            return self.forward_native(x)
        return table.silu_and_mul(x)

"""``SiluAndMul`` on the template platform: ``forward_oot`` calls the device's kernel."""

from __future__ import annotations

import torch
from vllm.model_executor.layers.activation import SiluAndMul

from vllm_platform_template.custom_ops.kernel_table import platform_kernel_table


@SiluAndMul.register_oot
class TemplateSiluAndMul(SiluAndMul):
    """SwiGLU activation through the device kernel (one pass over the gate/up halves)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.kernels = platform_kernel_table()  # once: forward_oot may be traced

    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        table = self.kernels
        if table is None or table.silu_and_mul is None:
            return self.forward_native(x)
        return table.silu_and_mul(x)

"""``SiluAndMul`` on the template platform: ``forward_oot`` calls the fused device kernel."""

from __future__ import annotations

import torch
from vllm.model_executor.layers.activation import SiluAndMul

from vllm_platform_template.kernels import cpu as cpu_kernels


@SiluAndMul.register_oot
class TemplateSiluAndMul(SiluAndMul):
    """SwiGLU activation through the device kernel (one pass over the gate/up halves)."""

    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            from vllm_platform_template.kernels.triton.activation import silu_and_mul

            return silu_and_mul(x)
        return cpu_kernels.silu_and_mul(x)

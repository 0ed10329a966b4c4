"""``RMSNorm`` on the template platform: the road to the kernels after vLLM IR.

vLLM 0.32/0.33 route ``RMSNorm.forward_native`` through vLLM IR
(``ir.ops.rms_norm`` / ``ir.ops.fused_add_rms_norm``), where the template's
providers serve it (``ir_impls``). vLLM 0.34 removes IR: "kernels will be
selected by the platform, as for other custom ops", i.e. through
``CustomOp.forward_oot``. This class is that road, usable today:

- ``kernel_road="ir"`` (default): ``forward_oot`` is ``forward_native``, the
  IR road;
- ``kernel_road="custom_op"``: ``forward_oot`` calls the device's kernel table
  directly (the same kernels the IR providers call), and the platform leaves
  only ``native`` in IR's priorities (``policy.default_ir_op_priority``).

When vLLM drops IR, ``ir_impls`` is deleted and this class's ``ir`` branch
goes with it; nothing else changes.
"""

from __future__ import annotations

import torch
from vllm.config import get_current_vllm_config_or_none
from vllm.model_executor.layers.layernorm import RMSNorm

from vllm_platform_template.custom_ops.kernel_table import platform_kernel_table
from vllm_platform_template.settings import options_of


@RMSNorm.register_oot
class TemplateRMSNorm(RMSNorm):
    """RMSNorm and the residual-add RMSNorm through the device kernels."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        config = get_current_vllm_config_or_none()
        road = options_of(config).kernel_road
        # Looked up once here, not per call: forward_oot is traced by Dynamo under
        # VLLM_COMPILE, and the lookup (an import by name) cannot be.
        self.kernels = platform_kernel_table() if road == "custom_op" else None

    def forward_oot(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        table = self.kernels
        if table is None:
            return self.forward_native(x, residual)
        eps, variance_size = self.variance_epsilon, self.variance_size_override
        if residual is None:
            weight = self.weight.data if self.pass_weight else None
            if table.rms_norm_supports(x, weight, eps, variance_size):
                return table.rms_norm(x, weight, eps, variance_size)
        else:
            weight = self.weight.data if self.pass_weight_add else None
            if table.fused_add_rms_norm_supports(x, residual, weight, eps, variance_size):
                return table.fused_add_rms_norm(x, residual, weight, eps, variance_size)
        return self.forward_native(x, residual)

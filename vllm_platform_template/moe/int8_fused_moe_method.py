"""W8A8 INT8 experts on the device's kernel: a monolithic MoE method for compressed-tensors.

vLLM hook: the quantization config's ``get_quant_method`` for MoE layers
(``quantization/compressed_tensors_config.py`` returns this method). vLLM's own
``CompressedTensorsW8A8Int8MoEMethod`` picks its kernel from an oracle that knows
vLLM's own kernels and no out-of-tree backend, so on a template platform it fails when
the layer is built. :class:`TemplateInt8FusedMoEMethod` keeps vLLM's
weights (``create_weights``: int8 ``w13``/``w2``, fp32 per-output-channel scales, as
the checkpoint stores them) and, like the unquantized method (``fused_moe_method.py``),
is monolithic: ``template::fused_moe_w8a8_int8``, the device kernel table's
``fused_moe_w8a8_int8``, routes and runs the experts from the router logits, the
activations quantized per token inside the op. Opaque to ``torch.compile`` and
counted per process (``device.counted_kernel``, in the worker's report).

What it runs: the checkpoints vLLM's INT8 MoE method takes (per-channel symmetric
weights, dynamic per-token activations) on Mixtral-style blocks; what the block asks
beyond that is refused when the weights are loaded (``refuse_unsupported``).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.model_executor.layers.fused_moe.config import (
    FusedMoEConfig,
    FusedMoEQuantConfig,
    int8_w8a8_moe_quant_config,
)
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe import (
    CompressedTensorsMoEMethod,
)
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_int8 import (  # noqa: E501
    CompressedTensorsW8A8Int8MoEMethod,
)
from vllm.model_executor.layers.quantization.utils import replace_parameter

from vllm_platform_template.device import counted_kernel
from vllm_platform_template.moe.fused_moe_method import refuse_unsupported


@torch.library.custom_op("template::fused_moe_w8a8_int8", mutates_args=())
def fused_moe_w8a8_int8(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w13_scale: torch.Tensor,
    w2: torch.Tensor,
    w2_scale: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    """The device kernel table's ``fused_moe_w8a8_int8`` (``KernelTable``'s contract)."""
    kernel = counted_kernel("fused_moe_w8a8_int8", x.device.type)
    return kernel(x, router_logits, w13, w13_scale, w2, w2_scale, top_k, renormalize)


@fused_moe_w8a8_int8.register_fake
def _(x: torch.Tensor, router_logits, w13, w13_scale, w2, w2_scale, top_k, renormalize):
    return torch.empty_like(x)


class TemplateInt8FusedMoEMethod(CompressedTensorsW8A8Int8MoEMethod):
    """W8A8 INT8 experts through ``template::fused_moe_w8a8_int8`` (see the module)."""

    def __init__(self, weight_quant: Any, input_quant: Any, moe: FusedMoEConfig) -> None:
        # vLLM's __init__ checks the scheme, then asks its kernel oracle (no OOT
        # backend): the same checks here, and no oracle.
        CompressedTensorsMoEMethod.__init__(self, moe)
        self.weight_quant = weight_quant
        self.input_quant = input_quant
        if not (
            weight_quant.strategy == "channel"
            and input_quant.strategy == "token"
            and input_quant.dynamic
            and input_quant.symmetric
        ):
            raise ValueError(
                "the template platform's INT8 experts take per-channel int8 weights with "
                "dynamic, symmetric per-token activations (llm-compressor's W8A8 scheme); "
                f"this checkpoint's experts have {weight_quant.strategy} weights and "
                f"{'dynamic' if input_quant.dynamic else 'static'} "
                f"{'symmetric' if input_quant.symmetric else 'asymmetric'} "
                f"{input_quant.strategy} activations: use stock vLLM (unset "
                "VLLM_TEMPLATE_DEVICE) for it"
            )
        self.static_input_scales = False

    @property
    def is_monolithic(self) -> bool:
        return True

    def process_weights_after_loading(self, layer: Any) -> None:
        refuse_unsupported(layer, "fused_moe_w8a8_int8")
        # The kernel table's layout: the loaded int8 weights as they are, [E, N] fp32
        # scales (vLLM loads them as [E, N, 1]); plain tensors (.data), not vLLM's
        # parameter subclasses.
        for name in ("w13_weight_scale", "w2_weight_scale"):
            scale = getattr(layer, name).data
            replace_parameter(
                layer,
                name,
                torch.nn.Parameter(
                    scale.reshape(scale.shape[0], -1).float().contiguous(), requires_grad=False
                ),
            )
        self.moe_quant_config = self.get_fused_moe_quant_config(layer)

    def get_fused_moe_quant_config(self, layer: Any) -> FusedMoEQuantConfig:
        return int8_w8a8_moe_quant_config(
            w1_scale=layer.w13_weight_scale,
            w2_scale=layer.w2_weight_scale,
            a1_scale=None,
            a2_scale=None,
            per_act_token_quant=True,
        )

    def apply_monolithic(
        self,
        layer: Any,
        x: torch.Tensor,
        router_logits: torch.Tensor,
        input_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return torch.ops.template.fused_moe_w8a8_int8(
            x,
            router_logits,
            layer.w13_weight,
            layer.w13_weight_scale,
            layer.w2_weight,
            layer.w2_weight_scale,
            layer.top_k,
            layer.renormalize,
        )

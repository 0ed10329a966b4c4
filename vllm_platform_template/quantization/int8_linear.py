"""W8A8 INT8 linear layers on the device's kernel: vLLM's ``register_linear_kernel``.

vLLM hook: ``register_linear_kernel(cls, PlatformEnum.OOT, "int8")``. vLLM's int8
schemes (compressed-tensors W8A8 among them) choose a scaled-mm kernel from a list per
platform; an out-of-tree platform has none, so without this registration every
quantized layer fails with "Failed to find a kernel". :class:`TemplateInt8LinearKernel`
takes symmetric, dynamic per-token activations (the common W8A8 checkpoint) and calls
the device kernel table's ``w8a8_int8_linear`` through the torch operator
``template::w8a8_int8_linear``: opaque to ``torch.compile`` (as vLLM's own kernels are),
and counted per process (``device.counted_kernel``, in the worker's report).
"""

from __future__ import annotations

import torch
from vllm.model_executor.kernels.linear import register_linear_kernel
from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import (
    Int8ScaledMMLinearKernel,
    Int8ScaledMMLinearLayerConfig,
)
from vllm.model_executor.layers.quantization.utils import replace_parameter
from vllm.model_executor.layers.quantization.utils.w8a8_utils import convert_to_channelwise
from vllm.platforms import PlatformEnum

from vllm_platform_template.device import counted_kernel


@torch.library.custom_op("template::w8a8_int8_linear", mutates_args=())
def w8a8_int8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """The device kernel table's ``w8a8_int8_linear`` (``KernelTable``'s contract)."""
    return counted_kernel("w8a8_int8_linear", x.device.type)(x, weight, weight_scale, bias)


@w8a8_int8_linear.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, bias=None):
    return x.new_empty((x.shape[0], weight.shape[0]))


class TemplateInt8LinearKernel(Int8ScaledMMLinearKernel):
    """vLLM's int8 scaled-mm kernel interface on the template device's kernel table."""

    @classmethod
    def is_supported(cls, compute_capability: int | None = None) -> tuple[bool, str | None]:
        from vllm_platform_template.custom_ops.kernel_table import platform_kernel_table

        table = platform_kernel_table()
        if table is None or table.w8a8_int8_linear is None:
            return False, "needs a template device with a w8a8_int8_linear kernel"
        return True, None

    @classmethod
    def can_implement(cls, c: Int8ScaledMMLinearLayerConfig) -> tuple[bool, str | None]:
        if c.is_static_input_scheme:
            return False, (
                "takes dynamic per-token activation scales only; this checkpoint has static "
                "input scales"
            )
        if not c.input_symmetric:
            return False, "takes symmetric activations only; this checkpoint's are asymmetric"
        return True, None

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        weight_name, scale_name = self.layer_param_names[:2]
        # plain tensors (.data): the loaded parameters are vLLM's parameter subclasses
        weight = getattr(layer, weight_name).data  # [N, K] int8, the checkpoint's layout
        scale = getattr(layer, scale_name).data
        if not self.config.is_channelwise:
            # per-tensor scales (one per merged shard, e.g. q/k/v): one per output channel
            widths: list[int] = list(layer.logical_widths)  # type: ignore[arg-type]
            scale = convert_to_channelwise(scale, widths)
        # The kernel table's layout: [N, K] weights (as loaded), [N] fp32 scales.
        replace_parameter(
            layer, weight_name, torch.nn.Parameter(weight.contiguous(), requires_grad=False)
        )
        replace_parameter(
            layer,
            scale_name,
            torch.nn.Parameter(scale.reshape(-1).float().contiguous(), requires_grad=False),
        )

    def apply_weights(
        self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        weight, scale = self._get_layer_params(layer)[:2]
        out = torch.ops.template.w8a8_int8_linear(x.reshape(-1, x.shape[-1]), weight, scale, bias)
        return out.reshape(*x.shape[:-1], weight.shape[0])


_registered = False


def register_int8_linear_kernel() -> None:
    """Add :class:`TemplateInt8LinearKernel` to vLLM's int8 kernels of out-of-tree
    platforms (idempotent; from the general-plugin entry point, every process)."""
    global _registered
    if not _registered:
        register_linear_kernel(TemplateInt8LinearKernel, PlatformEnum.OOT, "int8")
        _registered = True

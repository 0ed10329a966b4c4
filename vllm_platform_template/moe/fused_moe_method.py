"""vLLM's ``FusedMoE`` layers on the device's experts kernel: a monolithic MoE method.

vLLM hook: ``CustomOp.register_oot`` of ``UnquantizedFusedMoEMethod``. On an
out-of-tree platform vLLM's MoE oracle picks the ``OOT`` backend and builds no
kernel ("OOT handles internally"): the platform supplies the method. The template's
is *monolithic* (vLLM's term): the runner hands it the router logits and it does the
routing and the experts in one op, ``template::fused_moe``, the device kernel table's
``fused_moe`` (a device's grouped GEMM; the reference at first light). Routing inside
the op matters: vLLM's modular path routes with ``_moe_C.topk_softmax``, a compiled
extension of vLLM's that an out-of-tree device does not have. The op is opaque to
``torch.compile`` and counted per process (``device.counted_kernel``, in the worker's
report).

What it runs: Mixtral-style blocks (softmax routing, top-k, renormalised or not, SiLU
gated experts, no bias, all experts on this rank). Anything else is refused when the
weights are loaded, with what is missing.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import (
    UnquantizedFusedMoEMethod,
)

from vllm_platform_template.device import counted_kernel, kernel_table


@torch.library.custom_op("template::fused_moe", mutates_args=())
def fused_moe(
    x: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    """The device kernel table's ``fused_moe`` (``KernelTable``'s contract)."""
    kernel = counted_kernel("fused_moe", x.device.type)
    return kernel(x, router_logits, w13, w2, top_k, renormalize)


@fused_moe.register_fake
def _(x: torch.Tensor, router_logits, w13, w2, top_k, renormalize) -> torch.Tensor:
    return torch.empty_like(x)


def unsupported_features(layer: Any) -> list[str]:
    """What ``layer`` (vLLM's ``RoutedExperts``) asks for that the op does not do."""
    problems = []
    if getattr(layer, "use_grouped_topk", False):
        problems.append("grouped top-k routing")
    if getattr(layer, "custom_routing_function", None) is not None:
        problems.append("a custom routing function")
    if getattr(layer, "scoring_func", "softmax") != "softmax":
        problems.append(f"{layer.scoring_func} scoring")
    if getattr(layer, "e_score_correction_bias", None) is not None:
        problems.append("an expert score correction bias")
    if getattr(layer, "apply_router_weight_on_input", False):
        problems.append("router weights applied on the input")
    if getattr(layer, "expert_map", None) is not None:
        problems.append("expert parallelism (an expert map)")
    activation = getattr(layer, "activation", None)
    if getattr(activation, "value", activation) != "silu":
        problems.append(f"the {getattr(activation, 'value', activation)} activation")
    if layer.moe_config.has_bias:
        problems.append("expert biases")
    return problems


def refuse_unsupported(layer: Any, op: str) -> None:
    """Raise ValueError naming everything ``layer`` needs that the template's MoE methods
    lack: :func:`unsupported_features`, and the kernel table's ``op`` on the device its
    weights are on (the methods call it when the weights are loaded)."""
    problems = unsupported_features(layer)
    device_type = layer.w13_weight.device.type
    table = kernel_table(device_type)
    if table is None or getattr(table, op) is None:
        problems.append(f"a {op} kernel for {device_type}")
    if problems:
        raise ValueError(
            "the template platform's MoE layers run Mixtral-style blocks (softmax top-k "
            "routing, SiLU experts, no bias, every expert on this rank); this model's "
            f"{type(layer).__name__} needs {', '.join(problems)}: use stock vLLM (unset "
            "VLLM_TEMPLATE_DEVICE) for it"
        )


@UnquantizedFusedMoEMethod.register_oot
class TemplateFusedMoEMethod(UnquantizedFusedMoEMethod):
    """Unquantized experts through ``template::fused_moe`` (see the module docstring)."""

    @property
    def is_monolithic(self) -> bool:
        return True

    def process_weights_after_loading(self, layer: Any) -> None:
        super().process_weights_after_loading(layer)
        refuse_unsupported(layer, "fused_moe")

    def apply_monolithic(
        self,
        layer: Any,
        x: torch.Tensor,
        router_logits: torch.Tensor,
        input_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return torch.ops.template.fused_moe(
            x, router_logits, layer.w13_weight, layer.w2_weight, layer.top_k, layer.renormalize
        )

"""vLLM's hardware-agnostic layers on the template platform: their ``forward_oot`` calls the
device kernels.

vLLM hook: ``vllm.model_executor.hw_agnostic.custom_op.CustomOp.register_oot``, the
out-of-tree registry of vLLM's hardware-agnostic layers (``hw_agnostic/layers``),
separate from the classic ``CustomOp`` registry (``custom_ops/`` beside this file).
The Transformers modeling backend (``model_impl="transformers"``) builds its norms
and gated activations from those layers when ``VLLM_USE_HW_AGNOSTIC=1``;
``CustomOp.__new__`` then instantiates the replacement registered under the
layer's class name, and, when the op is enabled (``custom_ops`` holds ``all``,
the template's default without compilation) and the platform is out of tree,
calls its ``forward_oot``: here, the device's kernel table - the same kernels the
IR providers, the classic CustomOps and the hand-written model call.

Replaced: ``RMSNorm`` (with and without the residual add in the same kernel), ``SiluAndMul``
(``get_act_and_mul_fn("silu"/"swish")``), and the Transformers backend's
``TPAwareRMSNorm`` (its norm fuser's subclass of the hardware-agnostic
``RMSNorm``, registered by its own name once vLLM imports it, so the plugin never
imports the Transformers backend itself). ``GemmaRMSNorm`` has no
hardware-agnostic layer in vLLM 0.32/0.33 (vLLM falls back to its classic one).

:func:`register_hw_agnostic_ops` runs from the general-plugin entry point with the
classic registrations; a vLLM without the registry registers nothing.
Proven by the e2e tier's hardware-agnostic road tests (on the CPU backend:
tokens equal stock vLLM's and transformers'; on the device: ``test_hw_agnostic_road_matches``).
"""

from __future__ import annotations

import types
from typing import Any

import torch

from vllm_platform_template.custom_ops.kernel_table import platform_kernel_table
from vllm_platform_template.device import KernelTable

TP_AWARE_NORM_MODULE = "vllm.model_executor.models.transformers.fusers.rms_norm"
TP_AWARE_NORM = "TPAwareRMSNorm"


def rms_norm_oot(layer: Any, x: torch.Tensor, residual: torch.Tensor | None) -> Any:
    """A hardware-agnostic ``RMSNorm``'s forward through the layer's kernel table."""
    table: KernelTable | None = layer.kernels
    eps, variance_size = layer.variance_epsilon, layer.variance_size_override
    weight = layer.weight.data if layer.has_weight else None
    if table is not None:
        if residual is None:
            if table.rms_norm_supports(x, weight, eps, variance_size):
                return table.rms_norm(x, weight, eps, variance_size)
        elif table.fused_add_rms_norm_supports(x, residual, weight, eps, variance_size):
            return table.fused_add_rms_norm(x, residual, weight, eps, variance_size)
    return layer.forward_native(x, residual)


class _DeviceKernels:
    """Mixin: the layer resolves its platform's kernel table once, when it is built."""

    kernels: KernelTable | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kernels = platform_kernel_table()  # once: forward_oot may be traced


_registered = False


def register_hw_agnostic_ops() -> None:
    """Register the replacements in vLLM's hardware-agnostic registry (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        from vllm.model_executor.hw_agnostic.custom_op import op_registry_oot
        from vllm.model_executor.hw_agnostic.layers.activation import SiluAndMul
        from vllm.model_executor.hw_agnostic.layers.layernorm import RMSNorm
    except ImportError:
        return  # a vLLM without the hardware-agnostic layers

    from vllm_platform_template.after_import import after_import

    if "RMSNorm" not in op_registry_oot:

        @RMSNorm.register_oot
        class TemplateHwAgnosticRMSNorm(_DeviceKernels, RMSNorm):
            """Hardware-agnostic RMSNorm (and its residual-add form) on the device kernels."""

            def forward_oot(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> Any:
                return rms_norm_oot(self, x, residual)

    if "SiluAndMul" not in op_registry_oot:

        @SiluAndMul.register_oot
        class TemplateHwAgnosticSiluAndMul(_DeviceKernels, SiluAndMul):
            """Hardware-agnostic SwiGLU on the device's SiLU-and-multiply kernel."""

            def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
                table = self.kernels
                if table is None or table.silu_and_mul is None:
                    return self.forward_native(x)
                return table.silu_and_mul(x)

    after_import(TP_AWARE_NORM_MODULE, _register_tp_aware_norm)


def _register_tp_aware_norm(module: types.ModuleType) -> None:
    """The Transformers backend's ``TPAwareRMSNorm``, when it is the hardware-agnostic one."""
    from vllm.model_executor.hw_agnostic.custom_op import CustomOp, op_registry_oot

    base = getattr(module, TP_AWARE_NORM, None)
    if base is None or not issubclass(base, CustomOp) or TP_AWARE_NORM in op_registry_oot:
        return  # the classic RMSNorm under it (VLLM_USE_HW_AGNOSTIC unset), or registered

    class TemplateTPAwareRMSNorm(_DeviceKernels, base):  # type: ignore[misc, valid-type]
        """``TPAwareRMSNorm`` (gathers a TP-sharded input first) on the device kernels."""

        def forward_oot(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> Any:
            return rms_norm_oot(self, x, residual)

    base.register_oot(TemplateTPAwareRMSNorm, name=TP_AWARE_NORM)

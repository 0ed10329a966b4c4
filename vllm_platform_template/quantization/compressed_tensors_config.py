"""compressed-tensors checkpoints on the template platforms: vLLM's config, the plugin's experts.

vLLM hook: ``register_quantization_config("compressed-tensors")``. vLLM's
``CompressedTensorsConfig`` chooses each layer's method from the checkpoint's
scheme; for MoE layers with W8A8 INT8 experts it builds
``CompressedTensorsW8A8Int8MoEMethod``, whose kernel oracle has no out-of-tree
backend, so the layer fails on an out-of-tree platform. :class:`TemplateCompressedTensorsConfig`
is vLLM's config with one change: those layers get the plugin's
``TemplateInt8FusedMoEMethod`` (``moe/int8_fused_moe_method.py``). Every other layer
gets vLLM's method (linear layers keep vLLM's W8A8 scheme, which runs on the kernel
``int8_linear.py`` registers). Registered under vLLM's name, it replaces vLLM's class
in the process that registers it: ``platform_hooks.registration.register_all`` calls
:func:`register_compressed_tensors_config` only where a template platform is active.
"""

from __future__ import annotations

from typing import Any

from vllm.model_executor.layers.fused_moe import RoutedExperts
from vllm.model_executor.layers.quantization import register_quantization_config
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsConfig,
)

METHOD = "compressed-tensors"


class TemplateCompressedTensorsConfig(CompressedTensorsConfig):
    """vLLM's compressed-tensors config; W8A8 INT8 experts on the plugin's method."""

    def get_quant_method(self, layer: Any, prefix: str) -> Any:
        if isinstance(layer, RoutedExperts):
            quant = self._int8_experts_scheme(layer, prefix)
            if quant is not None:
                from vllm_platform_template.moe.int8_fused_moe_method import (
                    TemplateInt8FusedMoEMethod,
                )

                return TemplateInt8FusedMoEMethod(*quant, layer.moe_config)
        return super().get_quant_method(layer, prefix)

    def _int8_experts_scheme(self, layer: Any, prefix: str) -> tuple[Any, Any] | None:
        """``(weight_quant, input_quant)`` where ``layer``'s experts are W8A8 INT8 (the
        scheme vLLM's ``CompressedTensorsMoEMethod.get_moe_method`` would give its INT8
        method: the first expert's gate projection's, as vLLM reads it); else None."""
        self._add_fused_moe_to_target_scheme_map()
        scheme = self.get_scheme_dict(layer, f"{prefix}.0.{layer.ckpt_gate_proj_name}")
        if scheme is None:
            return None
        weight_quant: Any = scheme.get("weights")
        input_quant: Any = scheme.get("input_activations")
        if weight_quant is None or input_quant is None:
            return None
        is_int = weight_quant.type == input_quant.type == "int"
        if not (is_int and self._is_dynamic_token_w8a8(weight_quant, input_quant)):
            return None
        return weight_quant, input_quant


_registered = False


def register_compressed_tensors_config() -> None:
    """Make :class:`TemplateCompressedTensorsConfig` the ``compressed-tensors`` config of
    this process (idempotent)."""
    global _registered
    if not _registered:
        register_quantization_config(METHOD)(TemplateCompressedTensorsConfig)
        _registered = True

"""Eager custom ops: ``CustomOp.register_oot`` replacements of vLLM layers.

vLLM hook: ``CustomOp.register_oot``. A platform substitutes its own subclass
of an in-tree layer (``SiluAndMul``, ``RotaryEmbedding``, and ``RMSNorm``, whose
vLLM IR road ends in vLLM 0.34: ``layernorm.py``); vLLM then
instantiates the subclass wherever a model builds the layer, and when the op is
enabled (``custom_ops`` contains ``all``, the template's default in eager mode)
calls its ``forward_oot`` - which calls the device kernels. The MoE layers' method,
``UnquantizedFusedMoEMethod``, is replaced the same way (``moe/fused_moe_method.py``).

:func:`register_custom_ops` runs in every process from the general-plugin
entry point (idempotent), before any model is built. It also registers the
replacements of vLLM's hardware-agnostic layers, a registry of their own
(``hw_agnostic.py``: the Transformers modeling backend's road). vLLM's registry holds one
replacement per layer and asserts on a second: where another general plugin has
already replaced a layer, its class is kept (with a warning) and the template
registers the others, instead of aborting every vLLM process of the pair.
"""

from __future__ import annotations

import importlib

from vllm_platform_template.log import get_logger

logger = get_logger(__name__)

# module of this package -> the vLLM layer it replaces (the registry's key: the class name)
REPLACEMENTS = {
    "activation": "SiluAndMul",
    "layernorm": "RMSNorm",
    "rotary_embedding": "RotaryEmbedding",
}

_registered = False


def register_custom_ops() -> None:
    """Register the template's OOT replacements of vLLM layers (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    from vllm.model_executor.custom_op import op_registry_oot

    for module, layer in REPLACEMENTS.items():
        other = op_registry_oot.get(layer)
        if other is not None and not other.__module__.startswith(__name__):
            logger.warning(
                "template platform: %s is already replaced by %s.%s (another plugin); "
                "that class is kept and the template's %s is not registered",
                layer, other.__module__, other.__qualname__, layer,
            )  # fmt: skip
            continue
        importlib.import_module(f"{__name__}.{module}")
    from vllm_platform_template.custom_ops.hw_agnostic import register_hw_agnostic_ops

    register_hw_agnostic_ops()
    if "UnquantizedFusedMoEMethod" not in op_registry_oot:
        importlib.import_module("vllm_platform_template.moe.fused_moe_method")

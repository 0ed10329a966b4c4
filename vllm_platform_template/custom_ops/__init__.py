"""Eager custom ops: ``CustomOp.register_oot`` replacements of vLLM layers.

vLLM hook: ``CustomOp.register_oot``. A platform substitutes its own subclass
of an in-tree layer (``SiluAndMul``, ``RotaryEmbedding``, and ``RMSNorm``, whose
vLLM IR road ends in vLLM 0.34: ``layernorm.py``); vLLM then
instantiates the subclass wherever a model builds the layer, and when the op is
enabled (``custom_ops`` contains ``all``, the template's default in eager mode)
calls its ``forward_oot`` - which calls the device kernels.

:func:`register_custom_ops` runs in every process from the general-plugin
entry point (idempotent), before any model is built.
"""

from __future__ import annotations

_registered = False


def register_custom_ops() -> None:
    """Register the template's OOT replacements of vLLM layers (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    from vllm_platform_template.custom_ops import (  # noqa: F401
        activation,
        layernorm,
        rotary_embedding,
    )

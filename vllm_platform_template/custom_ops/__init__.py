"""Eager custom ops: ``CustomOp.register_oot`` replacements of vLLM layers.

vLLM hook: ``CustomOp.register_oot``. For layers that are not vLLM IR ops yet,
a platform substitutes its own subclass of the in-tree layer; vLLM then
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
    from vllm_platform_template.custom_ops import activation, rotary_embedding  # noqa: F401

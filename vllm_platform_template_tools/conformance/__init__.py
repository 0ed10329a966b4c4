"""Conformance kit: checks any plugin's vLLM IR providers against vLLM's semantics.

A plugin made from this template runs it against itself by importing the
test functions into one of its test modules::

    from vllm_platform_template_tools.conformance.suite import *  # noqa: F401,F403

For every vLLM IR op and every provider whose name starts with
``PROVIDER_PREFIX`` (supported ones run; unsupported ones are skipped with
their reason) it checks, over the op's own input generators and tolerances
from ``vllm.ir``, fp32/bf16/fp16, several shapes, non-contiguous rows,
``variance_size`` and ``weight=None``:

- numerical equality with the native implementation;
- ``maybe_inplace`` semantics (the default overload preserves its inputs; an
  in-place provider is handed clones there and may write only through
  ``maybe_inplace``);
- eager dispatch and compiled lowering (dispatch on fake tensors, as vLLM's
  lowering pass does) pick the same provider;
- arguments a provider does not support fall through to the next provider.

And for every device's kernel table, its ``w8a8_int8_linear``, ``fused_moe`` and
``fused_moe_w8a8_int8`` (the quantized linear layers' and the MoE layers' ops, no IR
op) against the reference
(``reference_kernels/int8_linear.py``, ``reference_kernels/fused_moe.py``).
"""

PROVIDER_PREFIX = "template_"

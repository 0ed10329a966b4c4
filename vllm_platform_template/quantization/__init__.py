"""Quantized models on the template platforms: which methods run, on which kernels.

vLLM hooks: ``Platform.supported_quantization`` / ``verify_quantization`` (what a
checkpoint may ask for), ``register_linear_kernel`` (``int8_linear.py``: the kernel
vLLM's W8A8 INT8 layers run on an out-of-tree platform) and
``register_quantization_config`` (``compressed_tensors_config.py``: W8A8 INT8 experts on
the plugin's MoE method).
"""

from __future__ import annotations

# The quantization methods whose layers run on the template's kernels: the
# compressed-tensors checkpoints of the W8A8 INT8 scheme (per-channel or per-tensor
# int8 weights, dynamic per-token symmetric activations; int8_linear.py), their
# experts included (per-channel weights; moe/int8_fused_moe_method.py).
SUPPORTED_QUANTIZATION = ["compressed-tensors"]


def unsupported_quantization_message(quant: str, platform: str) -> str:
    """What a user is told when a checkpoint's method is not one the platform runs."""
    return (
        f"{quant} quantization is not supported on the template's {platform} platform: it "
        f"runs {', '.join(SUPPORTED_QUANTIZATION)} checkpoints of the W8A8 INT8 scheme "
        "(vllm-template tiny-model --quantized writes one); use such a checkpoint, an "
        "unquantized model, or stock vLLM (unset VLLM_TEMPLATE_DEVICE)"
    )

"""The test device's speed tier: its own kernels in the kernel table (``kernels/__init__.py``).

What a vendor writes into a first-light plugin's ``devices/npu/kernels/`` once the
device's torch extension ships its kernels: each entry calls the extension's
operator (``torch.ops.npu.*``, PrivateUse1 and Meta kernels, counted by the
device; ``tests/test_device/npu_test_device/csrc/kernels.cpp``) with vLLM's op
semantics, and ``supports`` says which calls it takes. ``test_scaffold.py`` copies
this file over a generated ``new acme --device npu`` plugin's ``kernels/__init__.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm_acme.reference_kernels.fused_moe import fused_moe, fused_moe_w8a8_int8
from vllm_acme.reference_kernels.int8_linear import w8a8_int8_linear
from vllm_acme.reference_kernels.reference import native_gelu_and_mul_sparse as gelu_and_mul_sparse

# The MoE and W8A8 ops keep first light's reference kernels: the device has no grouped or
# int8 GEMM of its own yet.
__all__ = [
    "fused_add_rms_norm",
    "fused_moe",
    "fused_moe_w8a8_int8",
    "gelu_and_mul_sparse",
    "rms_norm",
    "silu_and_mul",
    "supports",
    "w8a8_int8_linear",
]


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None, epsilon: float, variance_size: int | None = None
) -> torch.Tensor:
    return torch.ops.npu.rms_norm(x, weight, epsilon, variance_size)


def fused_add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ops.npu.fused_add_rms_norm(x, residual, weight, epsilon, variance_size)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.npu.silu_and_mul(x)


def supports(*args: Any, **kwargs: Any) -> bool:
    """The device's kernels take every dtype and layout vLLM passes (host arithmetic)."""
    return True

"""The device's kernels: its torch extension's operators where it registers them, else reference.

The kernel table (``device.py``) takes its entries from here, with vLLM's op semantics
(``fused_add_rms_norm`` returns ``(out, x + residual)``). ``rms_norm``,
``fused_add_rms_norm``, ``silu_and_mul`` and ``rotary_embedding_`` are the extension's
``torch.ops.<LIBRARY>`` operators where it registers them (the PrivateUse1 test device
does; without one, vLLM's native rotary embedding runs), the rest the reference kernels
(plain torch, ``vllm_platform_template/reference_kernels/``). Speed, one op at a time
(docs/porting-guide.md, "10. Kernels: IR providers and custom ops"): register the kernel
in your extension's library with a fake (Meta) kernel, so that IR lowering can trace it
and a graph hold it, and say in ``supports`` which calls it takes.

vLLM hooks served: ``Platform.import_kernels`` (``device.load_libraries``) and, through
the kernel table, the IR provider and the CustomOps. No vLLM import. Proven by
``tests/devices/gpu/test_gpu_first_light.py`` (the reference) and
``tests/devices/gpu/test_gpu_full_graphs.py`` (the extension's, in FULL graphs).
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.reference_kernels.fused_moe import fused_moe, fused_moe_w8a8_int8
from vllm_platform_template.reference_kernels.int8_linear import w8a8_int8_linear
from vllm_platform_template.reference_kernels.reference import (
    native_fused_add_rms_norm,
    native_rms_norm,
)
from vllm_platform_template.reference_kernels.reference import (
    native_gelu_and_mul_sparse as gelu_and_mul_sparse,
)
from vllm_platform_template.reference_kernels.reference import (
    silu_and_mul as reference_silu_and_mul,
)

__all__ = ["fused_moe", "fused_moe_w8a8_int8", "gelu_and_mul_sparse", "w8a8_int8_linear"]

LIBRARY = IDENTITY.device_type  # torch.ops.<LIBRARY>: your extension's kernels


def registered(name: str) -> bool:
    """Whether the device's extension registers ``torch.ops.<LIBRARY>.<name>``."""
    return hasattr(getattr(torch.ops, LIBRARY), name)


def device_rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None, epsilon: float, variance_size: int | None = None
) -> torch.Tensor:
    return getattr(torch.ops, LIBRARY).rms_norm(x, weight, epsilon, variance_size)


def device_fused_add_rms_norm(
    x: torch.Tensor,
    x_residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    return getattr(torch.ops, LIBRARY).fused_add_rms_norm(
        x, x_residual, weight, epsilon, variance_size
    )


def device_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return getattr(torch.ops, LIBRARY).silu_and_mul(x)


def device_rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox_style: bool,
) -> None:
    getattr(torch.ops, LIBRARY).rotary_embedding(
        positions, query, key, head_size, cos_sin_cache, is_neox_style
    )


# The entries the device's extension serves in this process.
DEVICE_KERNELS = tuple(
    k
    for k in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding")
    if registered(k)
)
rms_norm = device_rms_norm if "rms_norm" in DEVICE_KERNELS else native_rms_norm
fused_add_rms_norm = (
    device_fused_add_rms_norm
    if "fused_add_rms_norm" in DEVICE_KERNELS
    else native_fused_add_rms_norm
)
silu_and_mul = device_silu_and_mul if "silu_and_mul" in DEVICE_KERNELS else reference_silu_and_mul
# in place; None: vLLM's native rotary embedding
rotary_embedding_ = device_rotary_embedding if "rotary_embedding" in DEVICE_KERNELS else None


def supports(*args: Any, **kwargs: Any) -> bool:
    """Every call: the reference is plain torch, the test device's take any dtype and layout."""
    return True

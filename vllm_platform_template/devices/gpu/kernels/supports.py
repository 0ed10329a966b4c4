"""Which calls the Triton kernels take: the device kernel table's ``supports`` checks.

Dtype, device and layout only (never the batch size, so dispatch does not
change with load). The kernels read rows through their stride, so strided rows
are fine; the last dimension must be contiguous.

vLLM hook served: the IR providers' ``supports_args`` and the CustomOps' choice
of kernel, through ``device.py``'s kernel table. Proven by
``tests/unit/test_gpu_kernel_supports.py`` (on fake device tensors) and, on the device,
the conformance kit's ``test_falls_through``.
"""

from __future__ import annotations

import torch

from vllm_platform_template.devices.gpu.identity import IDENTITY

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _rows_ok(x: torch.Tensor, weight: torch.Tensor | None) -> bool:
    return (
        x.device.type == IDENTITY.device_type
        and x.dtype in FLOAT_DTYPES
        and x.dim() >= 1
        and x.stride(-1) == 1
        and (weight is None or (weight.dtype == x.dtype and weight.shape == x.shape[-1:]))
    )


def rms_norm_supports(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> bool:
    return _rows_ok(x, weight)


def fused_add_rms_norm_supports(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> bool:
    return (
        _rows_ok(x, weight)
        and residual.shape == x.shape
        and residual.dtype == x.dtype
        and residual.stride(-1) == 1
    )


def gelu_and_mul_sparse_supports(
    x: torch.Tensor, std_multiplier: float, approximate: str = "none"
) -> bool:
    return (
        x.device.type == IDENTITY.device_type
        and x.dtype in FLOAT_DTYPES
        and x.stride(-1) == 1
        and x.shape[-1] % 2 == 0
    )

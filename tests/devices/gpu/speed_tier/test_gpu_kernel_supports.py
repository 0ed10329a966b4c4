"""The Triton kernels' ``supports`` checks: which calls the GPU folder's kernel table takes.

Dtype, device and layout only, checked on fake device tensors (no device memory
is touched), so this runs on any machine whose torch knows the device type.
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.kernels import supports

DEVICE = IDENTITY.device_type


def test_kernel_table_takes_only_rows_its_kernels_read() -> None:
    """The ``supports`` checks on fake device tensors (no device memory is touched)."""
    try:
        torch.device(DEVICE)
    except RuntimeError:
        pytest.skip(f"torch does not know the device type {DEVICE!r} (its extension is missing)")
    with FakeTensorMode():

        def empty(*shape: int, stride: tuple[int, ...] | None = None, dtype=torch.bfloat16):
            stride = stride or torch.empty(shape, device="meta").stride()
            return torch.empty_strided(shape, stride, device=DEVICE, dtype=dtype)

        x, w = empty(4, 8), empty(8)
        assert supports.rms_norm_supports(x, w, 1e-6)
        assert supports.rms_norm_supports(empty(4, 4, stride=(8, 1)), empty(4), 1e-6)  # row stride
        assert not supports.rms_norm_supports(empty(4, 8, stride=(1, 4)), None, 1e-6)
        assert not supports.rms_norm_supports(x, empty(8, dtype=torch.float32), 1e-6)
        assert not supports.rms_norm_supports(empty(4, 8, dtype=torch.int32), None, 1e-6)
        assert supports.fused_add_rms_norm_supports(x, empty(4, 8), w, 1e-6)
        assert not supports.fused_add_rms_norm_supports(x, empty(2, 8), w, 1e-6)
        assert supports.gelu_and_mul_sparse_supports(x, 1.0)
        assert not supports.gelu_and_mul_sparse_supports(empty(4, 7), 1.0)  # odd width
    assert not supports.rms_norm_supports(torch.empty(4, 8), None, 1e-6)  # another device

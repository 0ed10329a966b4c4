"""``reference_kernels.supports.RowKernels``: the ``supports`` checks every device folder's
kernel table gets from what its row kernels take (dtype, device, layout; never the
batch size)."""

from __future__ import annotations

import torch

from vllm_platform_template.reference_kernels.supports import RowKernels


def test_contiguous_aligned_rows_with_a_weight() -> None:
    rows = RowKernels(device_types=("cpu",), row_alignment=16, weight_required=True)
    x, w = torch.zeros(4, 32), torch.ones(32)
    assert rows.rms_norm_supports(x, w, 1e-6)
    assert not rows.rms_norm_supports(x, None, 1e-6)  # the kernels need a weight
    assert not rows.rms_norm_supports(torch.zeros(4, 24), torch.ones(24), 1e-6)  # alignment
    assert not rows.rms_norm_supports(torch.zeros(32, 4).t(), torch.ones(32), 1e-6)  # strided
    assert not rows.rms_norm_supports(x, w, 1e-6, variance_size=16)
    assert not rows.rms_norm_supports(x.double(), w.double(), 1e-6)  # dtype
    assert not rows.rms_norm_supports(x.to("meta"), w.to("meta"), 1e-6)  # device
    assert rows.fused_add_rms_norm_supports(x, torch.zeros(4, 32), w, 1e-6)
    assert not rows.fused_add_rms_norm_supports(x, torch.zeros(4, 32).half(), w, 1e-6)


def test_strided_rows_and_variance_size() -> None:
    rows = RowKernels(device_types=("cpu",), contiguous=False, takes_variance_size=True)
    x = torch.zeros(8, 64)[:, :32]  # rows strided, last dimension contiguous
    assert not x.is_contiguous()
    assert rows.rms_norm_supports(x, None, 1e-6, variance_size=16)
    assert not rows.rms_norm_supports(torch.zeros(32, 4).t(), None, 1e-6)  # column slices
    assert rows.fused_add_rms_norm_supports(x, x.clone(), None, 1e-6)


def test_the_activation_checks_layout_unless_any_layout() -> None:
    strided = torch.zeros(4, 8).t()
    assert not RowKernels(("cpu",)).gelu_and_mul_sparse_supports(strided, 1.0)
    assert RowKernels(("cpu",), activation_any_layout=True).gelu_and_mul_sparse_supports(
        strided, 1.0
    )
    assert not RowKernels(("cpu",)).gelu_and_mul_sparse_supports(torch.zeros(4, 7), 1.0)

"""The conformance kit's own helpers: a strided case must reach providers strided."""

from __future__ import annotations

import torch

from vllm_platform_template_tools.conformance.cases import clone_args


def test_clone_args_keeps_strided_rows_strided() -> None:
    rows = torch.randn(4, 16)[:, :8]  # rows with gaps, as a sliced activation buffer
    (copy,) = clone_args((rows,))
    assert copy.stride() == rows.stride() != rows.clone().stride()
    assert torch.equal(copy, rows)
    assert copy.data_ptr() != rows.data_ptr()

"""The ``supports`` checks of a device's row kernels, from what the kernels take.

vLLM hook served: the IR providers' ``supports_args`` and the CustomOps' choice of
kernel, through each device folder's kernel table (``device.KernelTable``'s
``*_supports``). A device folder states what its RMSNorm, residual add-norm and
sparse GELU kernels take (:class:`RowKernels`: device types, dtypes, row layout,
alignment, a required weight, ``variance_size``) and gets the three checks with
vLLM's argument lists. The checks look at dtype, device and layout only - never at
the batch size, so dispatch does not change with load. Proven by
``tests/shared/test_kernel_supports.py`` and each folder's own tests (the conformance
kit's ``test_falls_through`` runs every provider's checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class RowKernels:
    """What a device's row kernels take."""

    device_types: tuple[str, ...]
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES
    contiguous: bool = True
    """True: whole tensors contiguous; False: rows read through their stride (the
    last dimension contiguous)."""
    row_alignment: int = 1
    """The row length must be a multiple of it (SIMD kernels)."""
    weight_required: bool = False
    takes_variance_size: bool = False
    """True: RMSNorm over the first ``variance_size`` elements of a row is supported."""
    activation_any_layout: bool = False
    """True: the activation kernel takes any layout (it is plain torch)."""

    def _layout_ok(self, t: torch.Tensor) -> bool:
        return t.is_contiguous() if self.contiguous else t.stride(-1) == 1

    def _rows_ok(self, x: torch.Tensor, weight: torch.Tensor | None) -> bool:
        weight_ok = (
            weight is not None and weight.dtype == x.dtype and weight.shape == x.shape[-1:]
        ) or (weight is None and not self.weight_required)
        return (
            x.device.type in self.device_types
            and x.dtype in self.dtypes
            and x.dim() >= 1
            and self._layout_ok(x)
            and x.shape[-1] > 0
            and x.shape[-1] % self.row_alignment == 0
            and weight_ok
        )

    def rms_norm_supports(
        self,
        x: torch.Tensor,
        weight: torch.Tensor | None,
        epsilon: float,
        variance_size: int | None = None,
    ) -> bool:
        return (variance_size is None or self.takes_variance_size) and self._rows_ok(x, weight)

    def fused_add_rms_norm_supports(
        self,
        x: torch.Tensor,
        residual: torch.Tensor,
        weight: torch.Tensor | None,
        epsilon: float,
        variance_size: int | None = None,
    ) -> bool:
        return (
            self.rms_norm_supports(x, weight, epsilon, variance_size)
            and residual.shape == x.shape
            and residual.dtype == x.dtype
            and self._layout_ok(residual)
        )

    def gelu_and_mul_sparse_supports(
        self, x: torch.Tensor, std_multiplier: float, approximate: str = "none"
    ) -> bool:
        return (
            x.device.type in self.device_types
            and x.dtype in self.dtypes
            and (self.activation_any_layout or self._layout_ok(x))
            and x.shape[-1] % 2 == 0
        )

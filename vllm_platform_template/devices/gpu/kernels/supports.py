"""Which calls the Triton kernels take: the device kernel table's ``supports`` checks.

Dtype, device and layout only (never the batch size, so dispatch does not
change with load). The kernels read rows through their stride, so strided rows
are fine; the last dimension must be contiguous.

vLLM hook served: the IR providers' ``supports_args`` and the CustomOps' choice
of kernel, through ``device.py``'s kernel table. Proven by
``tests/devices/gpu/speed_tier/test_gpu_kernel_supports.py`` (on fake device tensors) and, on the
device,
the conformance kit's ``test_falls_through``.
"""

from __future__ import annotations

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.reference_kernels.supports import FLOAT_DTYPES, RowKernels

# The Triton kernels read rows through their stride (the last dimension contiguous) and
# take RMSNorm's variance_size.
ROWS = RowKernels(
    device_types=(IDENTITY.device_type,),
    dtypes=FLOAT_DTYPES,
    contiguous=False,
    takes_variance_size=True,
)
rms_norm_supports = ROWS.rms_norm_supports
fused_add_rms_norm_supports = ROWS.fused_add_rms_norm_supports
gelu_and_mul_sparse_supports = ROWS.gelu_and_mul_sparse_supports

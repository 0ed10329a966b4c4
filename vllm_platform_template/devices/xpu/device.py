"""The XPU device object: ``DEVICE``, what the rest of the plugin asks about this device.

Read by ``vllm_platform_template.device.device_for``; imports no vLLM and no
platform code (only this folder's kernels, loaded lazily).
"""

from __future__ import annotations

from typing import Any

from vllm_platform_template.device import KernelTable, TemplateDevice
from vllm_platform_template.devices.xpu import kernels


def kernel_table() -> KernelTable:
    return KernelTable(
        rms_norm=kernels.rms_norm,
        rms_norm_supports=kernels.rms_norm_supports,
        fused_add_rms_norm=kernels.fused_add_rms_norm,
        fused_add_rms_norm_supports=kernels.fused_add_rms_norm_supports,
    )


def graph_backend(pool: Any) -> Any:
    raise NotImplementedError(
        "the template XPU device has no static-graph backend yet; run with "
        "--enforce-eager or cudagraph_mode NONE, or add devices/xpu/graphs.py"
    )


DEVICE = TemplateDevice(
    name="xpu",
    torch_device_type="xpu",
    ir_provider="template_ipex",
    status=kernels.status,
    kernels=kernel_table,
    load_libraries=lambda: None,  # IPEX loads on first use (kernels.status)
    ir_ops=("rms_norm", "fused_add_rms_norm"),
    # IPEX's kernels also run on CPU tensors: the kit checks them there (tox -e ipex)
    kernel_test_device_type="cpu",
    # IPEX returns new tensors (its add_rms_norm is handed a copy of the residual)
    fused_add_rms_norm_inplace=False,
    graph_backend=graph_backend,
    # No measurements on an XPU: Inductor's code for all three ops until there are.
    native_under_inductor=("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"),
    packages=("intel-extension-for-pytorch",),
)

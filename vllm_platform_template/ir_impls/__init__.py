"""vLLM IR providers of the template: registration glue over the devices' kernel tables.

vLLM hook: ``Platform.import_ir_kernels`` imports this package in every process
that dispatches IR ops. Importing it registers one provider per device
(``TemplateDevice.ir_provider``, e.g. ``template_cpu`` for the CPU folder)
for each IR op the device's kernel table implements (``TemplateDevice.ir_ops``),
with ``vllm.ir.ops.<op>.register_impl``. The kernels and their argument checks
live in the device folders and import without vLLM; nothing here is device-specific.

``supported`` (static) says whether the provider can run on this machine at
all (``TemplateDevice.status``; the reason is kept in :data:`PROVIDER_STATUS` for
``vllm-template doctor``); ``supports_args`` (per call) is the table's
``*_supports`` check - dtype, device, layout, ``variance_size``, a missing
weight - never the batch size, so dispatch does not change with load.

This is the one module deleted when vLLM removes IR (0.34): the same kernels
then serve only the ``CustomOp`` road (``custom_ops``) and the hand-written model.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor
from vllm import ir

from vllm_platform_template.device import KernelTable, TemplateDevice, device_for, kernel_table
from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.ir_impls.status import PROVIDER_STATUS, ProviderStatus

__all__ = ["PROVIDER_STATUS", "ProviderStatus", "register_providers"]


def _table_of(device: TemplateDevice) -> Callable[[], KernelTable]:
    """``device``'s kernel table, loaded on first call (``device.kernel_table``, cached):
    a provider vLLM never calls here never imports its kernels."""

    def table() -> KernelTable:
        loaded = kernel_table(device.torch_device_type)
        assert loaded is not None, f"{device.ir_provider} called where its kernels cannot run"
        return loaded

    return table


# One (impl, supports_args) factory per IR op: vLLM checks that both have the
# native implementation's exact signature, so they are spelled out.
def _rms_norm(table: Callable[[], KernelTable]) -> tuple[Callable, Callable]:
    def impl(
        x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
    ) -> Tensor:
        return table().rms_norm(x, weight, epsilon, variance_size)

    def supports(
        x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
    ) -> bool:
        return table().rms_norm_supports(x, weight, epsilon, variance_size)

    return impl, supports


def _fused_add_rms_norm(table: Callable[[], KernelTable]) -> tuple[Callable, Callable]:
    def impl(
        x: Tensor,
        x_residual: Tensor,
        weight: Tensor | None,
        epsilon: float,
        variance_size: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        return table().fused_add_rms_norm(x, x_residual, weight, epsilon, variance_size)

    def supports(
        x: Tensor,
        x_residual: Tensor,
        weight: Tensor | None,
        epsilon: float,
        variance_size: int | None = None,
    ) -> bool:
        return table().fused_add_rms_norm_supports(x, x_residual, weight, epsilon, variance_size)

    return impl, supports


def _gelu_and_mul_sparse(table: Callable[[], KernelTable]) -> tuple[Callable, Callable]:
    def impl(x: Tensor, std_multiplier: float, approximate: str = "none") -> Tensor:
        kernel = table().gelu_and_mul_sparse
        assert kernel is not None
        return kernel(x, std_multiplier, approximate)

    def supports(x: Tensor, std_multiplier: float, approximate: str = "none") -> bool:
        check = table().gelu_and_mul_sparse_supports
        return check is not None and check(x, std_multiplier, approximate)

    return impl, supports


OP_FACTORIES: dict[str, Callable[[Callable[[], KernelTable]], tuple[Callable, Callable]]] = {
    "rms_norm": _rms_norm,
    "fused_add_rms_norm": _fused_add_rms_norm,
    "gelu_and_mul_sparse": _gelu_and_mul_sparse,
}


def register_providers(device: TemplateDevice) -> None:
    """Register ``device``'s provider for each IR op its kernel table implements."""
    supported, reason = device.kernels_status()
    PROVIDER_STATUS[device.ir_provider] = ProviderStatus(
        supported, reason, device.kernel_test_device_type or device.torch_device_type
    )
    table = _table_of(device)
    for op_name in device.ir_ops:
        impl, supports = OP_FACTORIES[op_name](table)
        op = getattr(ir.ops, op_name)
        op.register_impl(
            device.ir_provider,
            supported=supported,
            supports_args=supports,
            inplace=op_name == "fused_add_rms_norm" and device.fused_add_rms_norm_inplace,
        )(impl)


def _register_all() -> None:
    for device_type in DEVICE_PACKAGES:
        device = device_for(device_type)
        assert device is not None, device_type
        register_providers(device)


_register_all()

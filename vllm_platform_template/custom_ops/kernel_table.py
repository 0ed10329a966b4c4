"""The kernel table a CustomOp layer calls: its platform's device's, found once per layer.

Layers are built on the current platform's device, so each resolves the table
in ``__init__`` (``device.kernel_table``, an import by package name) instead of
per call: ``forward_oot`` is traced by Dynamo when a CustomOp is enabled under
VLLM_COMPILE, and an import cannot be traced.
"""

from __future__ import annotations

from vllm_platform_template.device import KernelTable, kernel_table


def platform_kernel_table() -> KernelTable | None:
    """The current platform's device kernels, or None (no template device, or not usable)."""
    from vllm.platforms import current_platform  # resolved when a layer is built

    return kernel_table(current_platform.device_type)

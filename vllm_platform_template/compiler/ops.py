"""The template's own torch custom ops (``torch.ops.template.*``), inserted by fusion passes.

The fusion passes replace matched patterns with these ops. They are proper
torch custom ops (schema, fake implementation), so Dynamo, AOTAutograd,
Inductor and the compile cache treat them as single opaque nodes; torch's
dispatcher sends each call to the kernel registered for the tensor's device
(one registration per device, from its kernel table), and to the torch
reference on any other. Importing this module registers them; it does not
import vLLM.
"""

from __future__ import annotations

import torch

from vllm_platform_template.device import kernel_table
from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.reference_kernels import reference


@torch.library.custom_op("template::silu_and_mul", mutates_args=())
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """SiLU-and-multiply, in one op, of the gate/up halves of ``x`` (last dimension)."""
    return reference.silu_and_mul(x)


@silu_and_mul.register_fake
def _silu_and_mul_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


def _device_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    table = kernel_table(x.device.type)
    if table is None or table.silu_and_mul is None:
        return reference.silu_and_mul(x)
    return table.silu_and_mul(x)


def _torch_knows(device_type: str) -> bool:
    """A device type torch has (a vendor's appears once its extension renames PrivateUse1)."""
    try:
        torch.device(device_type)
    except RuntimeError:
        return False
    return True


for _device_type in DEVICE_PACKAGES:
    if _torch_knows(_device_type):  # no tensors can live on a device torch does not know
        silu_and_mul.register_kernel(_device_type)(_device_silu_and_mul)

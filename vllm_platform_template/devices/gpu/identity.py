"""The device's torch identity: the one table of this folder that names the device.

vLLM hooks served: the identity attributes of the platform (``device_type``,
``device_name``, ``dispatch_key``, ``dist_backend``, ``device_control_env_var``,
``ray_device_key``, ``simple_compile_backend``) and, through them, every
runtime call this folder makes: the files that call the device's runtime read
this table (``torch_module()`` for ``torch.<device>``), the others take what
they need from those, and none spells the device itself. Porting the folder to
another torch device starts here (docs/porting-guide.md, "1. Identity").

A field set to ``None`` is a runtime API the device does not offer yet. The
first-light tier needs the device type, module, dispatch key and
``torch.distributed`` backend: without one, the entry point refuses the device and
names the hook with its guide section (``availability.py``), before vLLM imports
anything of this folder. The speed tier's (graph API, kernel compiler, array
interface) may stay ``None``: the platform then runs that part in first light
(eager, vLLM's V1 model runner, the reference kernels). Proven by
``tests/shared/test_device_identity.py``.

Only the standard library here: the entry point reads this table in every vLLM
process, before vLLM has finished loading plugins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceIdentity:
    """How torch and vLLM name one device, and the runtime APIs its hooks are built on."""

    device_type: str
    """``torch.device`` type of its tensors; also the value of the plugin's device setting."""
    torch_module: str
    """``torch.<torch_module>``, the device module its torch extension registers: what
    ``torch.accelerator`` does not answer (name, properties, seeding, streams)."""
    dispatch_key: str
    """The dispatch key vLLM registers its ``torch.ops.vllm.*`` ops under."""
    dist_backend: str | None
    """The ``torch.distributed`` backend of the device group (the communicator)."""
    graph_api: str | None
    """The device's graphs: ``"accelerator"`` for torch's ``torch.accelerator.Graph``
    (torch >= 2.13, the device's extension registering its implementation), or a class
    ``torch.<torch_module>.<graph_api>`` captured with ``torch.<torch_module>.graph``."""
    kernel_compiler: str | None
    """What compiles kernels for the device: this folder's kernels are written in it, and
    so are Inductor's generated code and vLLM's Model Runner V2 and sampler kernels."""
    array_interface: str | None
    """The protocol torch wraps raw device memory by (``torch.as_tensor``): device views
    of pinned host memory (UVA) and non-owning views of graph outputs."""
    visible_devices_env: str
    """The environment variable that restricts which devices a process sees."""
    ray_device_key: str
    """The Ray resource name of one device."""

    def torch_module_or_none(self) -> Any:
        """``torch.<torch_module>``, or None when torch has none (its extension is missing)."""
        import torch

        return getattr(torch, self.torch_module, None)

    def present(self) -> bool:
        """Whether torch sees one of these devices here (never raises)."""
        module = self.torch_module_or_none()
        try:
            return module is not None and bool(module.is_available())
        except Exception:  # a broken device runtime counts as no device
            return False


IDENTITY = DeviceIdentity(
    device_type="cuda",
    torch_module="cuda",
    dispatch_key="CUDA",
    dist_backend="nccl",
    graph_api="CUDAGraph",
    kernel_compiler="triton",
    array_interface="__cuda_array_interface__",
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    ray_device_key="GPU",
)


ACCELERATOR_GRAPH = "accelerator"
"""``graph_api`` for ``torch.accelerator.Graph``."""


def torch_module() -> Any:
    """``torch.<IDENTITY.torch_module>``; raises if torch has no such module."""
    module = IDENTITY.torch_module_or_none()
    if module is None:
        raise RuntimeError(
            f"torch has no module torch.{IDENTITY.torch_module}: install the torch extension "
            f"of your {IDENTITY.device_type} device"
        )
    return module

"""Device views of memory that vLLM makes with compiled ops, made with torch alone.

vLLM hooks served: the pinned / UVA buffers of Model Runner V2
(``vllm.utils.torch_utils.get_accelerator_view_from_cpu_tensor``, reached
through the patch registry's ``uva_device_view``: vLLM has no platform hook for
it) and the non-owning outputs of graph capture (vLLM's ``weak_ref_tensor``,
used by ``graphs.py``). Both views are built through the identity's
``array_interface`` (``__cuda_array_interface__``: torch wraps any object
describing device memory, no compiled code involved):

- :func:`device_view_of_pinned`: a device view of pinned host memory. Model
  Runner V2 keeps its per-step input buffers in pinned host memory and hands
  kernels a device view of the same bytes (no copy). Under unified virtual
  addressing a pinned host allocation has the same address on the device, so
  the view is an ordinary device tensor over that pointer. vLLM's CUDA build
  does it with ``torch.ops._C.get_cuda_view_from_cpu_tensor`` and refuses
  every out-of-tree platform.
- :func:`non_owning_view`: an alias of a device tensor's memory that does not
  keep it alive, for the outputs a graph pool owns.

A device without this protocol gives the same answers with its runtime's
host-mapped memory (docs/porting-guide.md, "Pinned and UVA buffers").
Proven by ``tests/devices/gpu/speed_tier/test_gpu_views.py`` (the refusals on any machine, the views
on the device in its ``gpu``-marked tests) and ``tests/devices/gpu/speed_tier/test_gpu_engine.py``.

No vLLM import: this is kernel-layer code, used by the patch registry.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_platform_template.devices.gpu.identity import IDENTITY, torch_module

_TYPESTR = {
    torch.float32: "<f4",
    torch.float16: "<f2",
    torch.float64: "<f8",
    torch.int64: "<i8",
    torch.int32: "<i4",
    torch.int16: "<i2",
    torch.int8: "|i1",
    torch.uint8: "|u1",
    torch.bool: "|b1",
}
# The one protocol torch.as_tensor reads device memory through.
SUPPORTED_INTERFACE = "__cuda_array_interface__"


class _MemoryDescription:
    """Describes ``tensor``'s memory by address in the identity's array interface.

    ``owner`` is kept alive with the description (a pinned host tensor must
    outlive its device view); a non-owning view passes None.
    """

    def __init__(self, tensor: torch.Tensor, typestr: str, owner: Any) -> None:
        if IDENTITY.array_interface != SUPPORTED_INTERFACE:
            raise NotImplementedError(
                f"device views need identity.py's array_interface ({IDENTITY.array_interface!r}"
                f" for {IDENTITY.device_type}); torch wraps only {SUPPORTED_INTERFACE}: see "
                "docs/porting-guide.md, 'Pinned and UVA buffers'"
            )
        self._owner = owner
        itemsize = tensor.element_size()
        description = {
            "shape": tuple(tensor.shape),
            "strides": tuple(s * itemsize for s in tensor.stride()),
            "typestr": typestr,
            "data": (tensor.data_ptr(), False),
            "version": 3,
        }
        setattr(self, SUPPORTED_INTERFACE, description)


def _typestr(dtype: torch.dtype, what: str) -> str:
    if dtype not in _TYPESTR:
        raise ValueError(f"no {what} for dtype {dtype}")
    return _TYPESTR[dtype]


def non_owning_view(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor over ``tensor``'s device memory that does not keep that memory alive.

    The caller guarantees the memory outlives the view (a graph's pool does:
    the graph writes its outputs there at every replay).
    """
    if tensor.device.type != IDENTITY.device_type:
        raise ValueError(f"expected a {IDENTITY.device_type} tensor, got one on {tensor.device}")
    if tensor.numel() == 0:
        return torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    if tensor.dtype == torch.bfloat16:
        return non_owning_view(tensor.view(torch.int16)).view(torch.bfloat16)
    described = _MemoryDescription(tensor, _typestr(tensor.dtype, "non-owning view"), None)
    return torch.as_tensor(described, device=tensor.device)


def device_view_of_pinned(cpu_tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor sharing ``cpu_tensor``'s pinned memory (writes are visible both ways).

    Raises ``ValueError`` for a tensor that is not on the CPU or not pinned:
    only page-locked memory is mapped into the device's address space.
    """
    if cpu_tensor.device.type != "cpu":
        raise ValueError(f"expected a CPU tensor, got one on {cpu_tensor.device}")
    if cpu_tensor.numel() == 0:
        return torch.empty(cpu_tensor.shape, dtype=cpu_tensor.dtype, device=IDENTITY.device_type)
    if not cpu_tensor.is_pinned():
        raise ValueError(
            "a device view needs pinned host memory: allocate the tensor with "
            "pin_memory=True (unified virtual addressing maps only page-locked memory)"
        )
    if cpu_tensor.dtype == torch.bfloat16:
        # The array interface has no bfloat16: map the bytes as int16, reinterpret.
        return device_view_of_pinned(cpu_tensor.view(torch.int16)).view(torch.bfloat16)
    described = _MemoryDescription(
        cpu_tensor, _typestr(cpu_tensor.dtype, "device view"), cpu_tensor
    )
    device = torch.device(IDENTITY.device_type, torch_module().current_device())
    return torch.as_tensor(described, device=device)

"""CUDA tensor views that vLLM makes with compiled ops, made with torch alone.

Two views, both built through ``__cuda_array_interface__`` (torch wraps any
object describing device memory, no compiled code involved):

- :func:`cuda_view_of_pinned`: a device view of pinned host memory (below);
- :func:`non_owning_view`: an alias of a CUDA tensor's memory that does not
  keep it alive - vLLM's ``weak_ref_tensor`` (``torch.ops._C.weak_ref_tensor``),
  which CUDA graph wrappers use for the outputs a graph pool owns.

Device views of pinned host memory (unified virtual addressing):

vLLM's Model Runner V2 keeps its per-step input buffers in pinned host memory
and hands kernels a device view of the same bytes (no copy), through
``vllm.utils.torch_utils.get_accelerator_view_from_cpu_tensor``. vLLM's CUDA
build does that with a compiled op (``torch.ops._C.get_cuda_view_from_cpu_tensor``)
and refuses every out-of-tree platform. Under CUDA's unified virtual
addressing a pinned host allocation has the same address on the device, so the
view is an ordinary CUDA tensor over that pointer; ``__cuda_array_interface__``
lets torch build it without any compiled code. A vendor's device gives the same
answer with its runtime's host-mapped memory (or tells vLLM it has no UVA).

No vLLM import: this is kernel-layer code, used by the patch registry.
"""

from __future__ import annotations

import torch

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


class _PinnedHostArray:
    """Describes a pinned host tensor as device memory; keeps that tensor alive."""

    def __init__(self, cpu_tensor: torch.Tensor, typestr: str) -> None:
        self._owner = cpu_tensor  # the view must not outlive the host allocation
        itemsize = cpu_tensor.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(cpu_tensor.shape),
            "strides": tuple(s * itemsize for s in cpu_tensor.stride()),
            "typestr": typestr,
            "data": (cpu_tensor.data_ptr(), False),
            "version": 3,
        }


class _DeviceArray:
    """Describes device memory by address only; owns nothing."""

    def __init__(self, tensor: torch.Tensor, typestr: str) -> None:
        itemsize = tensor.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(tensor.shape),
            "strides": tuple(s * itemsize for s in tensor.stride()),
            "typestr": typestr,
            "data": (tensor.data_ptr(), False),
            "version": 3,
        }


def non_owning_view(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor over ``tensor``'s CUDA memory that does not keep that memory alive.

    The caller guarantees the memory outlives the view (a CUDA graph's pool
    does: the graph writes its outputs there at every replay).
    """
    if tensor.device.type != "cuda":
        raise ValueError(f"expected a CUDA tensor, got one on {tensor.device}")
    if tensor.numel() == 0:
        return torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    if tensor.dtype == torch.bfloat16:
        return non_owning_view(tensor.view(torch.int16)).view(torch.bfloat16)
    if tensor.dtype not in _TYPESTR:
        raise ValueError(f"no non-owning view for dtype {tensor.dtype}")
    return torch.as_tensor(_DeviceArray(tensor, _TYPESTR[tensor.dtype]), device=tensor.device)


def cuda_view_of_pinned(cpu_tensor: torch.Tensor) -> torch.Tensor:
    """A CUDA tensor sharing ``cpu_tensor``'s pinned memory (writes are visible both ways).

    Raises ``ValueError`` for a tensor that is not on the CPU or not pinned:
    only page-locked memory is mapped into the device's address space.
    """
    if cpu_tensor.device.type != "cpu":
        raise ValueError(f"expected a CPU tensor, got one on {cpu_tensor.device}")
    if cpu_tensor.numel() == 0:
        return torch.empty(cpu_tensor.shape, dtype=cpu_tensor.dtype, device="cuda")
    if not cpu_tensor.is_pinned():
        raise ValueError(
            "a device view needs pinned host memory: allocate the tensor with "
            "pin_memory=True (unified virtual addressing maps only page-locked memory)"
        )
    dtype = cpu_tensor.dtype
    if dtype == torch.bfloat16:
        # __cuda_array_interface__ has no bfloat16: map the bytes as int16, reinterpret.
        return cuda_view_of_pinned(cpu_tensor.view(torch.int16)).view(torch.bfloat16)
    if dtype not in _TYPESTR:
        raise ValueError(f"no device view for dtype {dtype}")
    device = torch.device("cuda", torch.cuda.current_device())
    return torch.as_tensor(_PinnedHostArray(cpu_tensor, _TYPESTR[dtype]), device=device)

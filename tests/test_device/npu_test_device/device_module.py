"""``torch.npu``: the test device's module (``torch._register_device_module``).

What torch and its users look up by device name and ``torch.accelerator``
does not give: the device's name and properties, seeding, its fork check and
the graph pool ids vLLM shares between its graphs (``graph_pool_handle``).
Everything else here answers through ``torch.accelerator``, which reaches the
library's hooks, guard and allocator (``csrc/runtime.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

import npu_test_device

DeviceLike = torch.device | str | int | None


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    total_memory: int


def _index(device: DeviceLike) -> int:
    if device is None:
        return torch.accelerator.current_device_index()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return device.index if device.index is not None else torch.accelerator.current_device_index()


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    pass


def _is_in_bad_fork() -> bool:
    return False  # host memory and no driver: a forked child may use the device


def device_count() -> int:
    return int(torch._C._accelerator_hooks_device_count())


def current_device() -> int:
    return torch.accelerator.current_device_index()


def set_device(device: DeviceLike) -> None:
    torch.accelerator.set_device_index(_index(device))


def synchronize(device: DeviceLike = None) -> None:
    torch.accelerator.synchronize(_index(device))


def get_device_name(device: DeviceLike = None) -> str:
    return f"{npu_test_device.NAME} test device {_index(device)} (host memory)"


def get_device_properties(device: DeviceLike = None) -> DeviceProperties:
    _, total = torch.accelerator.get_memory_info(_index(device))
    return DeviceProperties(name=get_device_name(device), total_memory=total)


def get_device_capability(device: DeviceLike = None) -> dict[str, Any]:
    return torch.accelerator.get_device_capability(_index(device))


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    return torch.accelerator.get_memory_info(_index(device))


def memory_allocated(device: DeviceLike = None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: DeviceLike = None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: DeviceLike = None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def memory_stats(device: DeviceLike = None) -> dict[str, Any]:
    return torch.accelerator.memory_stats(_index(device))


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    torch.accelerator.empty_cache()


def manual_seed(seed: int) -> None:
    torch.ops.npu_test.manual_seed(current_device(), int(seed))


def manual_seed_all(seed: int) -> None:
    for index in range(device_count()):
        torch.ops.npu_test.manual_seed(index, int(seed))


def current_stream(device: DeviceLike = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def graph_pool_handle() -> tuple[int, int]:
    """A memory-pool id graphs can share (``torch.accelerator.Graph(pool=...)``), as CUDA's."""
    first, second = torch.ops.npu_test.graph_pool_handle()
    return int(first), int(second)

"""Device views of pinned host memory: a starting point (first light copies instead).

vLLM hook served: the pinned / UVA buffers of Model Runner V2
(``vllm.utils.torch_utils.get_accelerator_view_from_cpu_tensor``, reached
through the patch registry's ``uva_device_view``, which asks
``DEVICE.pinned_device_view``). First light runs vLLM's V1 model runner, which
copies its inputs to the device and needs no view: ``device.py`` names none.
Speed (docs/porting-guide.md, "9. Pinned and UVA buffers"): with Model Runner V2
on the device, return a device tensor over the same bytes as a pinned CPU
tensor (writes visible both ways) from your runtime's host-mapped memory, name
it as ``DEVICE.pinned_device_view``, and the protocol in the identity's
``array_interface``. Until then the first-light policy (V1 model runner, no
views) is what ``tests/devices/gpu/test_gpu_platform.py`` holds; the section's test
turns green once Model Runner V2 runs on the device.
"""

from __future__ import annotations

import torch

from vllm_platform_template.devices.gpu.identity import IDENTITY


def device_view_of_pinned(cpu_tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor sharing ``cpu_tensor``'s pinned memory (not written yet)."""
    raise NotImplementedError(
        f"device views of pinned memory on {IDENTITY.device_type}: see docs/porting-guide.md, "
        "'9. Pinned and UVA buffers'"
    )

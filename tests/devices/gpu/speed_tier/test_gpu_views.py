"""The GPU folder's device views (``views.py``): refusals on any machine, aliasing on the device.

The UVA view refuses memory that is not pinned instead of reading garbage, and
tensors of another device; on the device (``-m gpu``) the non-owning view
aliases its tensor's memory without keeping it alive (vLLM's ``weak_ref_tensor``
without its compiled op).
"""

from __future__ import annotations

import pytest
import torch

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.views import device_view_of_pinned, non_owning_view

DEVICE = IDENTITY.device_type
needs_device = pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {DEVICE} device")


def test_uva_view_refuses_unpinned_memory() -> None:
    with pytest.raises(ValueError, match="pinned"):
        device_view_of_pinned(torch.zeros(4))


def test_uva_view_refuses_non_cpu_tensors() -> None:
    with pytest.raises(ValueError, match="CPU tensor"):
        device_view_of_pinned(torch.zeros(4, device="meta"))


def test_non_owning_view_refuses_tensors_of_other_devices() -> None:
    with pytest.raises(ValueError, match=f"expected a {DEVICE} tensor"):
        non_owning_view(torch.zeros(4))


@pytest.mark.gpu
@needs_device
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_non_owning_view_aliases_without_holding(dtype: torch.dtype) -> None:
    """vLLM's weak_ref_tensor without its compiled op: same memory, no reference held."""
    base = torch.arange(12, device=DEVICE).to(dtype).reshape(3, 4)[1:]  # offset view
    view = non_owning_view(base)
    assert view.data_ptr() == base.data_ptr() and view.shape == base.shape
    assert view.stride() == base.stride() and view.dtype == dtype
    base.add_(1)
    torch.testing.assert_close(view, base)


@pytest.mark.gpu
@needs_device
def test_non_owning_view_does_not_keep_memory_alive() -> None:
    module = IDENTITY.torch_module_or_none()
    before = module.memory_allocated()
    base = torch.empty(1 << 20, device=DEVICE)
    owning, weak = base[:], non_owning_view(base)
    del base
    assert module.memory_allocated() > before  # the ordinary view holds the block
    del owning
    assert module.memory_allocated() == before  # the non-owning one does not
    assert weak.shape == (1 << 20,)

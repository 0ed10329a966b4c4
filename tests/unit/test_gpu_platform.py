"""The GPU folder's platform: its shape and answers, checked on any machine (no device).

What it does on the device is the GPU tier's job (``-m gpu``); here: it is a
plain ``Platform`` (no ``CudaPlatform``, so no compiled vLLM file), out of
tree, whose identity is the identity table's, with its own worker (no memory
pool of vLLM's sleep mode), communicator and block-size default, and its UVA
view refuses memory that is not pinned instead of reading garbage.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from vllm.platforms.interface import Platform, PlatformEnum

from vllm_platform_template.devices.gpu import platform as gpu
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.kernels import supports
from vllm_platform_template.devices.gpu.views import device_view_of_pinned, non_owning_view
from vllm_platform_template.devices.gpu.worker import TemplateGPUWorker
from vllm_platform_template.platform_plugin.activation import PLATFORM_QUALNAMES

DEVICE = IDENTITY.device_type
needs_device = pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {DEVICE} device")


def test_gpu_platform_is_a_plain_out_of_tree_platform() -> None:
    cls = gpu.TemplateGpuPlatform
    assert PLATFORM_QUALNAMES[DEVICE] == f"{cls.__module__}.{cls.__qualname__}"
    assert issubclass(cls, Platform)
    assert [c.__name__ for c in cls.__mro__ if c.__module__.startswith("vllm.platforms")] == [
        "Platform"
    ]
    assert cls._enum == PlatformEnum.OOT


def test_gpu_platform_identity_is_the_identity_table() -> None:
    cls = gpu.TemplateGpuPlatform
    assert (cls.device_type, cls.device_name) == (DEVICE, DEVICE)
    assert cls.dispatch_key == IDENTITY.dispatch_key
    assert cls.dist_backend == (IDENTITY.dist_backend or "")
    assert cls.device_control_env_var == IDENTITY.visible_devices_env
    assert cls.ray_device_key == IDENTITY.ray_device_key
    assert cls.template_device.torch_device_type == DEVICE


def test_gpu_worker_has_no_sleep_mode_memory_pool() -> None:
    """vLLM would reach for its CUDA-only sleep-mode allocator on an OOT platform."""
    assert not gpu.TemplateGpuPlatform().is_sleep_mode_available()
    pool = TemplateGPUWorker._maybe_get_memory_pool_context(None, "weights")  # type: ignore[arg-type]
    with pool:
        pass
    assert type(pool).__name__ == "nullcontext"


def test_gpu_platform_names_its_own_worker_and_communicator() -> None:
    config = SimpleNamespace(parallel_config=SimpleNamespace(worker_cls="auto"))
    gpu.TemplateGpuPlatform._update_worker(config)  # type: ignore[arg-type]
    assert config.parallel_config.worker_cls == gpu.TEMPLATE_GPU_WORKER
    assert gpu.TemplateGpuPlatform.get_device_communicator_cls() == gpu.GPU_COMMUNICATOR


@pytest.mark.parametrize(("given", "expected"), [(None, gpu.DEFAULT_BLOCK_SIZE), (32, 32)])
def test_gpu_platform_block_size_default(given: int | None, expected: int) -> None:
    config = SimpleNamespace(cache_config=SimpleNamespace(block_size=given))
    gpu.TemplateGpuPlatform._update_device_config(config)  # type: ignore[arg-type]
    assert config.cache_config.block_size == expected


def test_kernel_table_takes_only_rows_its_kernels_read() -> None:
    """The ``supports`` checks on fake device tensors (no device memory is touched)."""
    try:
        torch.device(DEVICE)
    except RuntimeError:
        pytest.skip(f"torch does not know the device type {DEVICE!r} (its extension is missing)")
    with FakeTensorMode():

        def empty(*shape: int, stride: tuple[int, ...] | None = None, dtype=torch.bfloat16):
            stride = stride or torch.empty(shape, device="meta").stride()
            return torch.empty_strided(shape, stride, device=DEVICE, dtype=dtype)

        x, w = empty(4, 8), empty(8)
        assert supports.rms_norm_supports(x, w, 1e-6)
        assert supports.rms_norm_supports(empty(4, 4, stride=(8, 1)), empty(4), 1e-6)  # row stride
        assert not supports.rms_norm_supports(empty(4, 8, stride=(1, 4)), None, 1e-6)
        assert not supports.rms_norm_supports(x, empty(8, dtype=torch.float32), 1e-6)
        assert not supports.rms_norm_supports(empty(4, 8, dtype=torch.int32), None, 1e-6)
        assert supports.fused_add_rms_norm_supports(x, empty(4, 8), w, 1e-6)
        assert not supports.fused_add_rms_norm_supports(x, empty(2, 8), w, 1e-6)
        assert supports.gelu_and_mul_sparse_supports(x, 1.0)
        assert not supports.gelu_and_mul_sparse_supports(empty(4, 7), 1.0)  # odd width
    assert not supports.rms_norm_supports(torch.empty(4, 8), None, 1e-6)  # another device


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

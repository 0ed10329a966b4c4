"""The device's platform: a plain vLLM ``Platform`` whose identity comes from ``identity.py``.

vLLM hook: the class the entry point (``platform_plugin.activation.register``)
names for ``VLLM_TEMPLATE_DEVICE=<IDENTITY.device_type>``. This is the shape a
vendor copies for a new accelerator: it subclasses
``vllm.platforms.interface.Platform`` directly (not vLLM's ``CudaPlatform``),
reports ``PlatformEnum.OOT`` and answers every question the engine asks of a
device itself, from torch's device module (``identity.torch_module()``). It
needs no compiled vLLM file: vLLM may be installed as pure Python
(``VLLM_TARGET_DEVICE=empty``), every kernel on the path is the plugin's or torch's.

Which hook serves what (docs/porting-guide.md, sections 1, 3 and 10):

- identity: ``device_name``/``device_type`` (the torch device), ``dispatch_key``
  (the key vLLM registers its ``torch.ops.vllm.*`` ops under), ``dist_backend``,
  ``device_control_env_var``, ``ray_device_key``: all from the identity table;
- device queries the engine makes while sizing memory and binding ranks:
  ``get_device_name``/``uuid``/``capability``/``total_memory``, ``set_device``,
  ``manual_seed_all`` (seeding), ``get_current_memory_usage``,
  ``num_compute_units``, ``check_if_supports_dtype``, ``is_pin_memory_available``;
  anything else vLLM asks (``synchronize``, ``mem_get_info``,
  ``graph_pool_handle``, streams) is forwarded by ``Platform.__getattr__`` to
  ``torch.<device_type>``;
- kernels: ``import_kernels`` loads the plugin's kernels instead of ``vllm._C``;
  the IR providers, custom ops, compiler, pass manager, graph wrapper and
  attention come from :class:`~.mixin.TemplatePlatformMixin`; the compiler's
  graph stage and vLLM's small helper compiles (``simple_compile_backend``) use
  Inductor, which generates code with the identity's ``kernel_compiler``;
- runtime: ``worker_cls`` -> ``worker.py`` (memory pool, sleep mode, model
  runner, sampler), ``get_device_communicator_cls`` -> ``communicator.py``.

Proven by ``tests/unit/test_gpu_platform.py`` (any machine: the shape and the
identity) and ``tests/e2e/test_gpu_engine.py`` (on the device: token parity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from vllm.platforms.interface import DeviceCapability, Platform

from vllm_platform_template.devices.gpu.device import DEVICE
from vllm_platform_template.devices.gpu.identity import IDENTITY, torch_module
from vllm_platform_template.log import get_logger
from vllm_platform_template.platform_plugin.mixin import TemplatePlatformMixin

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = get_logger(__name__)

STOCK_GPU_WORKER = "vllm.v1.worker.gpu_worker.Worker"
TEMPLATE_GPU_WORKER = "vllm_platform_template.devices.gpu.worker.TemplateGPUWorker"
GPU_COMMUNICATOR = "vllm_platform_template.devices.gpu.communicator.TemplateGpuCommunicator"
# The paged KV cache's block size when the user sets none (the Triton paged-attention
# kernel's tile; vLLM's CUDA default too).
DEFAULT_BLOCK_SIZE = 16
# bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer.
BF16_MIN_CAPABILITY = 80


class TemplateGpuPlatform(TemplatePlatformMixin, Platform):
    """An out-of-tree platform built on ``Platform`` alone, for the device of ``identity.py``."""

    template_device = DEVICE
    stock_worker_cls = STOCK_GPU_WORKER
    template_worker_cls = TEMPLATE_GPU_WORKER

    device_name = IDENTITY.device_type
    device_type = IDENTITY.device_type
    dispatch_key = IDENTITY.dispatch_key
    dist_backend = IDENTITY.dist_backend or ""  # None: activation refuses the device
    ray_device_key = IDENTITY.ray_device_key
    device_control_env_var = IDENTITY.visible_devices_env
    simple_compile_backend = "inductor"

    # --- device identity and queries --------------------------------------
    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch_module().get_device_name(device_id)

    @classmethod
    def get_device_uuid(cls, device_id: int = 0) -> str:
        return str(torch_module().get_device_properties(device_id).uuid)

    @classmethod
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability | None:
        major, minor = torch_module().get_device_capability(device_id)
        return DeviceCapability(major=major, minor=minor)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return int(torch_module().get_device_properties(device_id).total_memory)

    @classmethod
    def num_compute_units(cls, device_id: int = 0) -> int:
        return int(torch_module().get_device_properties(device_id).multi_processor_count)

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch_module().set_device(device)
        # Create the context now, not at the first kernel (pytorch/pytorch#155668).
        torch.zeros(1, device=device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch_module().manual_seed_all(seed)

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        torch_module().empty_cache()
        torch_module().reset_peak_memory_stats(device)
        return float(torch_module().max_memory_allocated(device))

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return True

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype != torch.bfloat16:
            return
        capability = cls.get_device_capability()
        assert capability is not None
        if capability.to_int() < BF16_MIN_CAPABILITY:
            raise ValueError(
                f"bfloat16 needs compute capability 8.0 or newer; {cls.get_device_name()} has "
                f"{capability.as_version_str()}. Run with --dtype float16 or float32."
            )

    # --- kernels and runtime ----------------------------------------------
    @classmethod
    def import_kernels(cls) -> None:
        """This folder's kernels (``device.load_libraries``), in place of vLLM's ``vllm._C``."""
        DEVICE.load_libraries()

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return GPU_COMMUNICATOR

    @classmethod
    def _update_device_config(cls, vllm_config: VllmConfig) -> None:
        cache_config = vllm_config.cache_config
        if cache_config.block_size is None:
            cache_config.block_size = DEFAULT_BLOCK_SIZE

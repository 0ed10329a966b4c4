"""The GPU reference backend's platform: a plain vLLM ``Platform`` for an NVIDIA GPU.

vLLM hook: the class the entry point (``platform_plugin.activation.register``) names for
``VLLM_TEMPLATE_DEVICE=cuda``. This is the shape a vendor copies for a new
accelerator: it subclasses ``vllm.platforms.interface.Platform`` directly (not
vLLM's ``CudaPlatform``), reports ``PlatformEnum.OOT`` and answers every
question the engine asks of a device itself, from torch's device module
(``torch.cuda`` here, ``torch.<your device>`` for a vendor). It needs no
compiled vLLM file: vLLM may be installed as pure Python
(``VLLM_TARGET_DEVICE=empty``, or the GPU tier's bundle), every kernel on the
path is the template's (Triton) or torch's.

Which hook serves what:

- identity: ``device_name``/``device_type`` (the torch device), ``dispatch_key``
  (the key vLLM registers its ``torch.ops.vllm.*`` ops under), ``dist_backend``;
- device queries the engine makes while sizing memory and binding ranks:
  ``get_device_name``/``uuid``/``capability``/``total_memory``, ``set_device``,
  ``manual_seed_all``, ``get_current_memory_usage``, ``num_compute_units``,
  ``check_if_supports_dtype``, ``is_pin_memory_available``; anything else vLLM
  asks (``synchronize``, ``mem_get_info``, ``graph_pool_handle``, streams) is
  forwarded by ``Platform.__getattr__`` to ``torch.cuda``;
- kernels: ``import_kernels`` loads the template's Triton kernels instead of
  ``vllm._C``; the IR providers, custom ops, compiler, pass manager, graph
  wrapper and attention come from :class:`~.mixin.TemplatePlatformMixin`;
- runtime: ``worker_cls`` -> :mod:`.worker` (memory pool / sleep mode),
  ``get_device_communicator_cls`` -> :mod:`.communicator` (NCCL), and the
  pinned-memory device view Model Runner V2 needs (patch registry:
  ``uva_device_view``, vLLM has no hook for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from vllm.platforms.interface import DeviceCapability, Platform

from vllm_platform_template.devices.gpu.device import DEVICE
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
    """An out-of-tree platform for NVIDIA GPUs built on ``Platform`` alone."""

    template_device = DEVICE
    stock_worker_cls = STOCK_GPU_WORKER
    template_worker_cls = TEMPLATE_GPU_WORKER

    device_name = "cuda"
    device_type = "cuda"
    dispatch_key = "CUDA"
    dist_backend = "nccl"
    ray_device_key = "GPU"
    device_control_env_var = "CUDA_VISIBLE_DEVICES"
    simple_compile_backend = "inductor"

    # --- device identity and queries --------------------------------------
    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.cuda.get_device_name(device_id)

    @classmethod
    def get_device_uuid(cls, device_id: int = 0) -> str:
        return str(torch.cuda.get_device_properties(device_id).uuid)

    @classmethod
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability | None:
        major, minor = torch.cuda.get_device_capability(device_id)
        return DeviceCapability(major=major, minor=minor)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return int(torch.cuda.get_device_properties(device_id).total_memory)

    @classmethod
    def num_compute_units(cls, device_id: int = 0) -> int:
        return int(torch.cuda.get_device_properties(device_id).multi_processor_count)

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.cuda.set_device(device)
        # Create the context now, not at the first kernel (pytorch/pytorch#155668).
        torch.zeros(1, device=device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.cuda.manual_seed_all(seed)

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return float(torch.cuda.max_memory_allocated(device))

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
        """The template's Triton kernels, in place of vLLM's compiled ``vllm._C``."""
        DEVICE.load_libraries()

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return GPU_COMMUNICATOR

    @classmethod
    def _update_device_config(cls, vllm_config: VllmConfig) -> None:
        cache_config = vllm_config.cache_config
        if cache_config.block_size is None:
            cache_config.block_size = DEFAULT_BLOCK_SIZE

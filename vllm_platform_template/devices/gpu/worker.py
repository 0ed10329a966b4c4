"""The device's worker: vLLM's GPU worker with the platform's answers.

vLLM hooks served: ``parallel_config.worker_cls`` (set in
``check_and_update_config``), and through it the memory pool, sleep mode, the
model runner and its sampler (docs/porting-guide.md, sections 4 and 6).

- Memory pool and sleep mode: vLLM's ``gpu_worker.Worker`` runs the model
  runner, memory profiling and graph capture on any torch device; it only asks
  an out-of-tree platform for one thing it cannot give: a memory pool for
  weights and KV cache. vLLM returns a plain allocation context for
  CUDA/ROCm/XPU/CPU and otherwise reaches for its sleep-mode allocator
  (``CuMemAllocator``, compiled, CUDA-only). This platform has no sleep mode
  (``is_sleep_mode_available()`` is False, so vLLM's config refuses
  ``enable_sleep_mode``): tensors come from torch's caching allocator.
- Model runner and sampler: the worker builds vLLM's own choice
  (``VllmConfig.use_v2_model_runner``: Model Runner V2 wherever Triton is
  importable, else V1; ``VLLM_USE_V2_MODEL_RUNNER=0`` forces V1). Model Runner
  V2 prepares its inputs and samples with vLLM's Triton kernels
  (``vllm/v1/worker/gpu/sample/``) on the device, and keeps its batch in pinned
  buffers read through device views (``views.py``): so it needs the identity's
  ``kernel_compiler`` to be Triton, which activation checks.

- FULL graphs: after vLLM's warm-up and capture (``compile_or_warm_up_model``)
  the worker counts the FULL graphs Model Runner V2 captured and replays
  (``graph_wrapper.stats.watch_full_graphs``), for the report and the tests.

Proven by ``tests/unit/test_gpu_platform.py`` (the worker and memory pool the
platform names) and, on the device, ``tests/e2e/test_gpu_engine.py``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from vllm.v1.worker.gpu_worker import Worker

from vllm_platform_template.graph_wrapper.stats import watch_full_graphs
from vllm_platform_template.platform_plugin.worker_reports import TemplateWorkerReports


class TemplateGPUWorker(TemplateWorkerReports, Worker):
    """vLLM's ``Worker`` for this folder's platform."""

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        return nullcontext()

    def compile_or_warm_up_model(self) -> Any:
        times = super().compile_or_warm_up_model()
        watch_full_graphs(self.model_runner)
        return times

"""The CPU worker of the template platform.

vLLM hook: ``parallel_config.worker_cls`` (set in ``check_and_update_config``).
The stock ``CPUWorker`` is reused; this subclass fixes what an out-of-tree
platform loses because vLLM keys CPU behaviour on ``is_cpu()``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from vllm.v1.worker.cpu_worker import CPUWorker


class TemplateCPUWorker(CPUWorker):
    """``CPUWorker`` for the template CPU platform."""

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        # vLLM returns nullcontext() only for is_cpu()/CUDA/XPU; other platforms get
        # the sleep-mode allocator, which the CPU has not ("Sleep mode allocator is
        # not available on platform ...").
        return nullcontext()

    def template_report(self) -> dict[str, Any]:
        """RPC target of ``LLM.collective_rpc``: what ran where in this worker."""
        from vllm_platform_template.reporting import worker_report

        return worker_report(self)

    def template_stats(self) -> dict[str, Any]:
        """Compiler statistics of this worker (empty when nothing was compiled)."""
        from vllm_platform_template.compiler.stats import snapshot

        return {"compile": snapshot()}

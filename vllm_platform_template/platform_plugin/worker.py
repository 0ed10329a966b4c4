"""The CPU worker of the template platform.

vLLM hook: ``parallel_config.worker_cls`` (set in ``check_and_update_config``).
The stock ``CPUWorker`` is reused; this subclass fixes what an out-of-tree
platform loses because vLLM keys CPU behaviour on ``is_cpu()``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from vllm.config import CompilationMode
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.worker_base import CompilationTimes

from vllm_platform_template.platform_plugin.options import parse_options


class TemplateCPUWorker(CPUWorker):
    """``CPUWorker`` for the template CPU platform."""

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        # vLLM returns nullcontext() only for is_cpu()/CUDA/XPU; other platforms get
        # the sleep-mode allocator, which the CPU has not ("Sleep mode allocator is
        # not available on platform ...").
        return nullcontext()

    def compile_or_warm_up_model(self) -> CompilationTimes:
        # vLLM's CPUWorker never captures graphs; the template platform runs the
        # compiled pieces as (emulated) static graphs, captured here as the GPU
        # worker does after warm-up.
        if not self.model_config.enforce_eager:
            from vllm_platform_template.graph_wrapper.capture import capture_piecewise_graphs

            capture_piecewise_graphs(self.model_runner)
        return super().compile_or_warm_up_model()

    def template_report(self) -> dict[str, Any]:
        """RPC target of ``LLM.collective_rpc``: what ran where in this worker."""
        from vllm_platform_template.reporting import worker_report

        return worker_report(self)

    def template_stats(self) -> dict[str, Any]:
        """Compiler statistics of this worker (empty when nothing was compiled)."""
        from vllm_platform_template.compiler.stats import snapshot
        from vllm_platform_template.graph_wrapper.stats import snapshot as graph_snapshot

        compile_stats = snapshot()
        if self.vllm_config.compilation_config.mode == CompilationMode.VLLM_COMPILE:
            compile_stats["stage"] = parse_options(self.vllm_config.additional_config).compile_stage
        return {"compile": compile_stats, "graphs": graph_snapshot()}

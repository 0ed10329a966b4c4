"""The report RPCs every template worker answers (``LLM.collective_rpc``).

Kept apart from the workers themselves: the CPU worker module imports vLLM's
CPU worker, which replaces ``torch.cuda`` stream and event classes for the
whole process, so a GPU worker must never import it.
"""

from __future__ import annotations

from typing import Any

from vllm.config import CompilationMode

from vllm_platform_template.settings import parse_options


class TemplateWorkerReports:
    """Mixin for a vLLM worker class: ``template_report`` and ``template_stats``."""

    def template_report(self) -> dict[str, Any]:
        """RPC target of ``LLM.collective_rpc``: what ran where in this worker."""
        from vllm_platform_template.reporting import worker_report

        return worker_report(self)

    def template_stats(self) -> dict[str, Any]:
        """Compiler and graph statistics of this worker."""
        from vllm_platform_template.compiler.stats import snapshot
        from vllm_platform_template.graph_wrapper.stats import snapshot as graph_snapshot

        vllm_config = self.vllm_config  # type: ignore[attr-defined]
        compile_stats = snapshot()
        if vllm_config.compilation_config.mode == CompilationMode.VLLM_COMPILE:
            compile_stats["stage"] = parse_options(vllm_config.additional_config).compile_stage
        return {"compile": compile_stats, "graphs": graph_snapshot()}

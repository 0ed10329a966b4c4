"""The report RPCs every template worker answers (``LLM.collective_rpc``).

Kept apart from the workers themselves: the CPU worker module imports vLLM's
CPU worker, which replaces ``torch.cuda`` stream and event classes for the
whole process, so another device's worker must never import it.

The mixin also times the worker's part of engine start-up (vLLM hooks: the
worker methods vLLM's executor calls, ``load_model`` through
``compile_or_warm_up_model``), for the demo's ``init`` split.
"""

from __future__ import annotations

import time
from typing import Any

from vllm.config import CompilationMode

from vllm_platform_template.settings import options_of


class TemplateWorkerReports:
    """Mixin for a vLLM worker class: ``template_report``, ``template_stats`` and
    the start-up times ``template_stats`` reports."""

    _template_times: dict[str, float]

    def _template_mark(self, name: str) -> None:
        self.__dict__.setdefault("_template_times", {})[name] = time.perf_counter()

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        self._template_mark("load_start")
        super().load_model(*args, **kwargs)  # type: ignore[misc]
        self._template_mark("load_end")

    def compile_or_warm_up_model(self) -> Any:
        # The last start-up call vLLM's engine makes (after the profile run and the
        # KV cache): "init engine (profile, create kv cache, warmup model)" ends here.
        result = super().compile_or_warm_up_model()  # type: ignore[misc]
        self._template_mark("warm_up_end")
        return result

    def startup_times(self) -> dict[str, float]:
        """Seconds of this worker's start-up: ``model_load`` (vLLM's load_model),
        ``engine_init`` (from the end of the load to the end of the warm-up: the
        profile/compile run, the KV cache, graph capture and warm-up; vLLM's
        "init engine ... took" line times the same span from the engine process)
        and ``compile`` (vLLM's ``compilation_time``: "torch.compile took ... in
        total"). Empty before the engine finished starting."""
        marks = self.__dict__.get("_template_times", {})
        if not {"load_start", "load_end", "warm_up_end"} <= set(marks):
            return {}
        vllm_config = self.vllm_config  # type: ignore[attr-defined]
        return {
            "model_load": round(marks["load_end"] - marks["load_start"], 3),
            "engine_init": round(marks["warm_up_end"] - marks["load_end"], 3),
            "compile": round(float(vllm_config.compilation_config.compilation_time), 3),
        }

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
            compile_stats["stage"] = options_of(vllm_config).compile_stage
        return {
            "compile": compile_stats,
            "graphs": graph_snapshot(),
            "startup_s": self.startup_times(),
        }

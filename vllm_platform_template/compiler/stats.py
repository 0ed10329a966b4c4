"""What the template compiler did in this process, for reports and tests.

The compiler runs inside the worker; every template worker's ``template_stats``
(``platform_hooks/worker_reports.py``) returns :func:`snapshot` through
``LLM.collective_rpc``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CompileStats:
    stage: str | None = None
    compiled_pieces: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    fallbacks: list[str] = field(default_factory=list)
    fallback_causes: dict[str, str] = field(default_factory=dict)  # piece -> "Error: message"
    fusion_matches: dict[str, int] = field(default_factory=dict)
    lowering: dict[str, dict[str, int]] = field(default_factory=dict)
    attention_nodes_in_pieces: int = 0  # must stay 0: the graph is split at attention

    def add_time(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + seconds, 4)


STATS = CompileStats()


def snapshot() -> dict[str, Any]:
    """Plain-data view including vLLM's cache counters (AOT artifacts loaded = warm start)."""
    from vllm.compilation.counter import compilation_counter as c

    return {
        "stage": STATS.stage,
        "pieces": len(STATS.compiled_pieces),
        "compiled": list(STATS.compiled_pieces),
        "seconds": dict(STATS.seconds),
        "fallbacks": list(STATS.fallbacks),
        "fallback_causes": dict(STATS.fallback_causes),
        "fusion_matches": dict(STATS.fusion_matches),
        "lowering": {op: dict(v) for op, v in STATS.lowering.items()},
        "attention_nodes_in_pieces": STATS.attention_nodes_in_pieces,
        "cache": {
            "aot_artifacts_loaded": c.num_aot_artifacts_loaded,
            "aot_artifacts_saved": c.num_aot_artifacts_saved,
            "compiled_artifacts_loaded": c.num_compiled_artifacts_loaded,
            "backend_compilations": c.num_backend_compilations,
        },
    }

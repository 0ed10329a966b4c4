"""Capture and replay counts of the graphs in this process (for reports and tests).

``STATS``: the piecewise graphs of ``TemplateGraphWrapper``. ``FULL_STATS``: the
whole-step (FULL) graphs: those vLLM's Model Runner V2 captures and replays itself
(``CudaGraphManager``), counted by :func:`watch_full_graphs`, or those
``TemplateFullGraphWrapper`` captures for vLLM's V1 runner (``full.py``), so a report
says from the runner which steps replayed FULL graphs - equal tokens alone would
hide a silent fallback to piecewise or eager steps.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class GraphStats:
    captures: Counter[int] = field(default_factory=Counter)  # by num_tokens
    replays: Counter[int] = field(default_factory=Counter)
    eager_fallbacks: Counter[int] = field(default_factory=Counter)
    backend: str | None = None


STATS = GraphStats()
FULL_STATS = GraphStats()


def watch_full_graphs(model_runner: Any) -> None:
    """Count the FULL graphs ``model_runner``'s graph manager captured, and each replay.

    Model Runner V2 keeps its FULL graphs in ``cudagraph_manager.graphs`` (keyed by
    batch descriptors) and replays one per step through ``run_fullgraph``; this wraps
    that method on the instance (one counter update per step). Call it after the
    runner captured its graphs (``Worker.compile_or_warm_up_model``). A runner
    without that manager (V1, CPU) has no FULL graphs: nothing to watch.
    """
    manager = getattr(model_runner, "cudagraph_manager", None)
    if manager is None or not hasattr(manager, "graphs"):
        return
    FULL_STATS.backend = type(manager).__name__
    FULL_STATS.captures.clear()
    for desc in manager.graphs:
        FULL_STATS.captures[desc.num_tokens] += 1
    replay = manager.run_fullgraph
    if getattr(replay, "__template_counted__", False):
        return

    def run_fullgraph(desc: Any) -> Any:
        FULL_STATS.replays[desc.num_tokens] += 1
        return replay(desc)

    run_fullgraph.__template_counted__ = True  # type: ignore[attr-defined]
    manager.run_fullgraph = run_fullgraph


def _counts(counter: Counter[int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(counter.items())}


def snapshot() -> dict[str, Any]:
    """Piecewise graph counts, and the FULL graphs' under ``"full"`` (by num_tokens)."""
    return {
        "backend": STATS.backend,
        "captures": _counts(STATS.captures),
        "replays": _counts(STATS.replays),
        "eager_fallbacks": _counts(STATS.eager_fallbacks),
        "full": {
            k: _counts(getattr(FULL_STATS, k)) for k in ("captures", "replays", "eager_fallbacks")
        },
    }

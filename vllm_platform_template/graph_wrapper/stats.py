"""Capture and replay counts of the graph wrappers in this process (for reports and tests)."""

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


def snapshot() -> dict[str, Any]:
    return {
        "backend": STATS.backend,
        "captures": {str(k): v for k, v in sorted(STATS.captures.items())},
        "replays": {str(k): v for k, v in sorted(STATS.replays.items())},
        "eager_fallbacks": {str(k): v for k, v in sorted(STATS.eager_fallbacks.items())},
    }

"""The arithmetic of ``gpu_e2e.py``: per-round ratios, medians, ranges, spreads (no torch).

A run's figures are ``runs[engine][metric] = [value of round 1, round 2, ...]``:
every engine measured once per round, rounds interleaving the engines. A ratio
against a baseline engine is taken within each round (the two values were
measured minutes apart at most) and then summarised by its median and its
min-max range over the rounds; never as a ratio of medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

# Metrics where a larger value is faster (a rate); all others are times.
RATES = ("prefill_tok_s",)


def median_range(values: Sequence[float]) -> dict[str, Any]:
    """Median, min-max range and the values themselves."""
    if not values:
        raise ValueError("no values to summarise")
    return {
        "median": statistics.median(values),
        "range": [min(values), max(values)],
        "values": list(values),
    }


def spread(values: Sequence[float]) -> float:
    """(max - min) / median of one engine's rounds: 0.25 means the rounds differ by 25 %."""
    if not values:
        raise ValueError("no values")
    mid = statistics.median(values)
    if mid <= 0:
        raise ValueError(f"spread of non-positive values {list(values)}")
    return (max(values) - min(values)) / mid


def time_ratios(metric: str, engine: Sequence[float], base: Sequence[float]) -> list[float]:
    """Per-round engine / base in time units (below 1: the engine is faster).

    A rate (tokens/s) is inverted first, so every ratio reads the same way:
    engine's time over the base's time.
    """
    if len(engine) != len(base):
        raise ValueError(f"{metric}: {len(engine)} rounds against {len(base)}")
    if metric in RATES:
        return [b / e for e, b in zip(engine, base, strict=True)]
    return [e / b for e, b in zip(engine, base, strict=True)]


def ratio_summary(
    runs: dict[str, dict[str, list[float]]], base: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every other engine's per-round time ratio to ``base``: median and range per metric."""
    if base not in runs:
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for engine, figures in runs.items():
        if engine == base:
            continue
        out[engine] = {
            metric: median_range(time_ratios(metric, values, runs[base][metric]))
            for metric, values in figures.items()
            if metric in runs[base]
        }
    return out


def widest(
    runs: dict[str, dict[str, list[float]]], metrics: Sequence[str], limit: float
) -> tuple[str, str, int, float] | None:
    """The (engine, metric, round, spread) whose rounds spread most past ``limit``, or None.

    ``round`` is the index of the value farthest from that engine's median: the
    round to measure again.
    """
    worst: tuple[str, str, int, float] | None = None
    for engine, figures in runs.items():
        for metric in metrics:
            values = figures.get(metric)
            if not values or len(values) < 2:
                continue
            s = spread(values)
            if s > limit and (worst is None or s > worst[3]):
                mid = statistics.median(values)
                far = max(range(len(values)), key=lambda i: abs(values[i] - mid))
                worst = (engine, metric, far, s)
    return worst


def summarise(runs: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Median and range of every engine's every metric."""
    return {
        engine: {metric: median_range(values) for metric, values in figures.items()}
        for engine, figures in runs.items()
    }

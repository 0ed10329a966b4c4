"""The arithmetic of ``gpu_e2e.py``: quad ratios, their median and bootstrap interval, a verdict.

A comparison of a candidate engine B against a baseline A is a fixed number of
quads, each four short units of work in the order A B B A or B A A B (the two
orders alternate quad by quad): a drift that is linear in time over a quad
cancels, and neither engine always goes first. A quad's ratio for one metric is
the geometric mean of B's two units over the geometric mean of A's two, in time
units (a rate such as prefill tokens/s is inverted first, so below 1 always
means B is faster). Over the quads: the median ratio and a bootstrap 95 %
interval of that median (resampled quads, a fixed seed: the same data give the
same interval). Every quad counts: none is dropped, replaced or added once the
figures are seen.

The verdict at a margin ``m`` (0.05: five per cent) reads the interval only:
``faster`` when its upper bound is below ``1 - m``, ``slower`` when its lower
bound is above ``1 + m``, ``same`` when it lies within ``[1 - m, 1 + m]``, and
``undecided`` otherwise (the data cannot tell at that margin). The null test,
stock against a second stock engine, must give an interval containing 1; its
width is the harness's resolution on that machine.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

# Metrics where a larger value is faster (a rate); all others are times.
RATES = ("prefill_tok_s",)
ORDERS = ("ABBA", "BAAB")
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261128


def as_time(metric: str, value: float) -> float:
    """The value in time units: a rate is inverted (so that below 1 reads "faster")."""
    if value <= 0:
        raise ValueError(f"{metric}: non-positive value {value}")
    return 1.0 / value if metric in RATES else value


def geometric_mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("geometric mean of nothing")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def quad_ratio(metric: str, order: str, units: Sequence[float]) -> float:
    """B over A in one quad: ``units`` are the four values in ``order`` (``ABBA``/``BAAB``)."""
    if order not in ORDERS or len(units) != 4:
        raise ValueError(f"a quad is four units in the order ABBA or BAAB, got {order} {units}")
    times = [as_time(metric, u) for u in units]
    a = [t for who, t in zip(order, times, strict=True) if who == "A"]
    b = [t for who, t in zip(order, times, strict=True) if who == "B"]
    return geometric_mean(b) / geometric_mean(a)


def bootstrap_median_interval(
    values: Sequence[float],
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values``."""
    if len(values) < 2:
        raise ValueError(f"an interval needs at least two values, got {len(values)}")
    rng = random.Random(seed)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - level) / 2
    lo = medians[math.floor(tail * (resamples - 1))]
    hi = medians[math.ceil((1 - tail) * (resamples - 1))]
    return lo, hi


def verdict(interval: tuple[float, float], margin: float) -> str:
    """``faster`` / ``slower`` / ``same`` at ``margin``, or ``undecided`` (module docstring)."""
    lo, hi = interval
    if hi < 1 - margin:
        return "faster"
    if lo > 1 + margin:
        return "slower"
    if lo >= 1 - margin and hi <= 1 + margin:
        return "same"
    return "undecided"


def compare(quads: Sequence[float], margin: float) -> dict[str, Any]:
    """The summary of one metric's quad ratios: median, interval, its width, the verdict."""
    interval = bootstrap_median_interval(quads)
    return {
        "median": statistics.median(quads),
        "interval": list(interval),
        "width": interval[1] - interval[0],
        "verdict": verdict(interval, margin),
        "quads": list(quads),
    }


def median_range(values: Sequence[float]) -> dict[str, Any]:
    """Median, min-max range and the values themselves (an engine's own figures)."""
    if not values:
        raise ValueError("no values to summarise")
    return {
        "median": statistics.median(values),
        "range": [min(values), max(values)],
        "values": list(values),
    }

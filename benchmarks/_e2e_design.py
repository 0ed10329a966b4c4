"""The order of ``gpu_e2e.py``'s work, seeded and recorded, so that no engine holds one position.

Positions an engine could hold for a whole run, and what the harness does about each:

- **Cores.** Every unit runs on the same *measurement* cores, whichever engine it
  measures: before a unit the harness moves every thread of that engine's processes
  there and every other engine's threads onto the *parking* cores
  (``_gpu_idle.pin_tree``). The parked engines are idle (``_gpu_idle.Window`` proves
  it), so no engine's figures depend on the cores it was given. (The harness before
  gave each engine a fixed set of cores for the whole run: two identical stock engines
  then differed by 2 % on the H200, an interval of [1.009, 1.027].) While the engines
  start, side by side, each compiles on an equal set of its own, assigned by the seed.
  The harness keeps the first core.
- **Start order.** The engines start in a seeded random order. An engine starts once,
  so this position cannot rotate within a run: it changes from run to run (the seed
  is drawn afresh unless given), and each run's null test shows whether it mattered.
- **Quad order.** A *round* holds one pair of quads per comparison with stock, ABBA
  then BAAB or BAAB then ABBA. The comparisons' order within a round and each pair's
  orientation are seeded random, under one rule: no quad starts with the engine that
  just ran. Then in every quad each engine has exactly one unit that follows its own,
  and in a pair each engine holds each of the four positions once: the pair is the
  unit of the statistics (``_e2e_stats.py``).
- **Device rounds.** The device pass's engines run in a seeded order, rotated by one
  place each round, so each engine holds each place equally often.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from _e2e_stats import ORDERS


@dataclass(frozen=True)
class CoreLayout:
    """The harness's core, the measurement and parking cores, each engine's start cores."""

    harness: list[int]
    measure: list[int]
    park: list[int]
    start: dict[str, list[int]]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def core_layout(
    engines: Sequence[str], cores: Sequence[int], rng: random.Random
) -> CoreLayout | None:
    """The harness keeps the first core; of the rest, the first half measures and the
    second parks, and for the start each engine gets an equal set of them in a seeded
    order. None when there are too few cores for two each at the start."""
    ordered = sorted(cores)
    rest = ordered[1:]
    share = len(rest) // max(len(engines), 1)
    if share < 2:
        return None
    half = len(rest) // 2
    shuffled = rng.sample(list(engines), len(engines))
    start = {e: rest[i * share : (i + 1) * share] for i, e in enumerate(shuffled)}
    return CoreLayout(ordered[:1], rest[:half], rest[half:], start)


def start_order(engines: Sequence[str], rng: random.Random) -> list[str]:
    """The order the engines are started (and waited for) in: seeded random."""
    return rng.sample(list(engines), len(engines))


@dataclass(frozen=True)
class PlannedQuad:
    """One quad of a comparison: its index among that comparison's quads and its order."""

    comparison: str
    index: int
    order: str

    def engines(self, baseline: str) -> list[str]:
        """The engine of each of its four units (A: the baseline, B: the comparison's)."""
        return [baseline if who == "A" else self.comparison for who in self.order]


def round_plan(
    comparisons: Sequence[str], round_: int, last: str | None, baseline: str, rng: random.Random
) -> list[PlannedQuad]:
    """Round ``round_``: per comparison, in a seeded order, its quads ``2 round_`` and
    ``2 round_ + 1`` as ABBA+BAAB or BAAB+ABBA (seeded), never starting a quad with
    ``last``, the engine that ran just before (a pair ABBA+BAAB starts with A and ends
    with B, its reverse the other way round: one of the two always fits)."""
    plan: list[PlannedQuad] = []
    for comparison in rng.sample(list(comparisons), len(comparisons)):
        first = rng.choice(ORDERS)
        if PlannedQuad(comparison, 0, first).engines(baseline)[0] == last:
            first = ORDERS[1 - ORDERS.index(first)]
        second = ORDERS[1 - ORDERS.index(first)]
        pair = [
            PlannedQuad(comparison, 2 * round_, first),
            PlannedQuad(comparison, 2 * round_ + 1, second),
        ]
        plan += pair
        last = pair[-1].engines(baseline)[-1]
    return plan


def device_order(engines: Sequence[str], round_: int, rng_seed: int) -> list[str]:
    """The device pass's order in round ``round_``: a seeded order rotated by the round."""
    base = random.Random(rng_seed).sample(list(engines), len(engines))
    shift = round_ % max(len(base), 1)
    return base[shift:] + base[:shift]

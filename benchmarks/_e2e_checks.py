"""The checks that make ``gpu_e2e.py`` fail loudly instead of printing a flattering table.

- :func:`argument_differences`: every engine got the same engine arguments and
  environment but for the keys that choose the platform and its backends
  (``PLATFORM_KEYS``, ``PLATFORM_ENV``); anything else that differs is listed.
  (The first harness let stock's dtype follow a CPU-only rule: stock ran in
  float32 beside a bf16 template.)
- :func:`backend_problem`: stock's default engine ran its default attention
  backend (FlashAttention on Hopper), not the one vLLM falls back to.
- :func:`null_problems`: the null test - stock against a second stock engine -
  whose interval must contain 1 for every metric; else the harness sees a
  difference between two identical engines and can decide nothing. The metrics
  are checked as one family (Bonferroni: each at ``1 - NULL_TEST_ALPHA / k``), so
  that two identical engines fail the self-check about one run in twenty, not
  one in six as four separate 95 % intervals would.
- :func:`busy_units`: units during which another engine's processes used CPU
  time (``_gpu_idle.py``): not measured alone. More than ``BUSY_UNITS_LIMIT`` of
  them fails the run.
- :func:`goals`: the issue's goals as verdicts of the harness (``_e2e_stats``):
  met, missed (with the interval) or unmet because stock's default-backend
  engine did not run.

Each returns plain lists and dicts, so the unit tests drive it with made-up
probe results (``tests/unit/test_gpu_e2e_checks.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from _e2e_stats import bootstrap_median_interval

NULL_TEST_ALPHA = 0.05
"""The chance that two identical engines fail the null test, over all its metrics."""

# Engine arguments that may differ between engines: they choose the platform and its
# backends (the template's own options ride in additional_config).
PLATFORM_KEYS = frozenset({"attention_backend", "additional_config"})
# Environment that selects the platform (the plugin off for stock, the template's device).
PLATFORM_ENV = frozenset({"VLLM_PLUGINS", "VLLM_USE_FLASHINFER_SAMPLER", "VLLM_TEMPLATE_DEVICE"})
# A unit during which another engine's process tree used more CPU than this (seconds per
# second of the unit) was not measured alone. An idle vLLM engine (probe and
# engine core) used 0.01-0.06 s in 1-5 s windows on the CPU machine (1.2 % of a core:
# timed waits); one that runs work uses a whole core.
IDLE_CPU_LIMIT = 0.05
# More units than this share not measured alone: the run fails.
BUSY_UNITS_LIMIT = 0.1


def argument_differences(engines: dict[str, dict[str, Any]]) -> list[str]:
    """Arguments (``kwargs``) and environment (``env``) that differ beyond the platform's."""
    problems: list[str] = []
    names = sorted(engines)
    if len(names) < 2:
        return problems
    first = names[0]
    for part, allowed in (("kwargs", PLATFORM_KEYS), ("env", PLATFORM_ENV)):
        reference = {k: v for k, v in engines[first].get(part, {}).items() if k not in allowed}
        for name in names[1:]:
            other = {k: v for k, v in engines[name].get(part, {}).items() if k not in allowed}
            for key in sorted(set(reference) | set(other)):
                if reference.get(key, "<absent>") != other.get(key, "<absent>"):
                    problems.append(
                        f"{part}[{key!r}]: {first}={reference.get(key, '<absent>')!r}, "
                        f"{name}={other.get(key, '<absent>')!r}"
                    )
    return problems


def backend_problem(resolved: dict[str, Any] | None, expected: str) -> str | None:
    """Why stock's default engine did not run its default backend, or None.

    vLLM falls back silently: when FlashAttention's compiled file does not load,
    the default engine runs the next backend in line (Triton on Hopper), and a
    comparison against "stock's default" would compare against stock's Triton.
    """
    backends = (resolved or {}).get("attention_backends")
    if not backends:
        return f"stock's attention backend unknown (worker answered {resolved!r})"
    if any(not b.startswith(f"{expected} ") for b in backends):
        return f"stock's default engine ran {backends}, not {expected}"
    return None


def null_problems(null: dict[str, dict[str, Any]]) -> list[str]:
    """Metrics whose null-test interval (second stock over stock, its quad ratios
    ``row["quads"]``) at the family-wise level does not contain 1."""
    level = 1 - NULL_TEST_ALPHA / max(len(null), 1)
    problems = []
    for metric, row in null.items():
        lo, hi = bootstrap_median_interval(row["quads"], level=level)
        if not lo <= 1.0 <= hi:
            problems.append(
                f"null test {metric}: stock'/stock median {row['median']:.3f}, "
                f"{level:.2%} interval [{lo:.3f}, {hi:.3f}] does not contain 1 - the "
                "harness tells two identical engines apart"
            )
    return problems


def busy_units(units: Sequence[dict[str, Any]], limit: float = IDLE_CPU_LIMIT) -> list[str]:
    """Units during which another engine used CPU (their ``others_cpu_s`` over the window)."""
    problems = []
    for u in units:
        for other, cpu_s in u["others_cpu_s"].items():
            if cpu_s > limit * max(u["wall_s"], 1.0):
                problems.append(
                    f"quad {u['quad']} {u['pair']}, {u['engine']}: {other} used "
                    f"{cpu_s:.3f} s of CPU in the {u['wall_s']:.2f} s unit"
                )
    return problems


# The goals: template over stock's default backend, judged by the harness's
# verdict at the margin (GOAL_MARGIN): "faster" needs the interval's upper bound below
# 1 - margin; "not slower" the upper bound at most 1 + margin.
GOAL_MARGIN = 0.05
STEP_GOALS: dict[str, dict[int, str]] = {
    "1.1b": {1: "faster", 8: "faster", 64: "faster"},
    "8b": {1: "faster", 32: "faster"},
    "8b-w8a8": {1: "faster", 32: "faster"},
    "mixtral-8l": {1: "not slower", 32: "not slower"},
}
PREFILL_GOAL = "not slower"
BANDWIDTH_GOALS = {"8b": {1: 0.85}}  # fraction of the bandwidth limit at batch 1


def goal_met(kind: str, interval: Sequence[float], margin: float = GOAL_MARGIN) -> bool:
    """``faster``: upper bound below ``1 - margin``; ``not slower``: at most ``1 + margin``."""
    if kind == "faster":
        return interval[1] < 1 - margin
    if kind == "not slower":
        return interval[1] <= 1 + margin
    raise ValueError(f"unknown goal {kind!r}")


def goals(
    shape: str,
    ratios: dict[str, dict[str, Any]],
    fractions: dict[int, float],
    stock_ran: bool,
) -> list[dict[str, Any]]:
    """Each goal of the shape for one template engine: ``ratios[metric]`` is its comparison
    with stock (``_e2e_stats.compare``), ``fractions[batch]`` its share of the limit."""
    wanted = [(f"step_ms_b{b}", f"batch {b} step", k) for b, k in STEP_GOALS.get(shape, {}).items()]
    wanted.append(("prefill_tok_s", "2048-token prefill", PREFILL_GOAL))
    out: list[dict[str, Any]] = []
    for metric, what, kind in wanted:
        goal = f"{what} {kind} than stock (margin {GOAL_MARGIN:.0%})"
        row = ratios.get(metric)
        if not stock_ran:
            out.append({"goal": goal, "status": "unmet: stock's default backend did not run"})
        elif row is None:
            out.append({"goal": goal, "status": "unmet: not measured"})
        else:
            met = goal_met(kind, row["interval"])
            out.append({"goal": goal, "status": "met" if met else "missed", "value": row})
    for batch, bound in BANDWIDTH_GOALS.get(shape, {}).items():
        goal = f"batch {batch}: at least {bound:.0%} of the bandwidth limit"
        frac = fractions.get(batch)
        if frac is None:
            out.append({"goal": goal, "status": "unmet: not measured"})
        else:
            out.append(
                {"goal": goal, "status": "met" if frac >= bound else "missed", "value": frac}
            )
    return out

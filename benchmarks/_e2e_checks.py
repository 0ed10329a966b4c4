"""The checks that make ``gpu_e2e.py`` fail loudly instead of printing a flattering table.

- :func:`differences`: every engine got the same engine arguments (``kwargs``) and
  environment - as asked (``env``) and as it stood once the engine was built
  (``env`` updated by ``env_changed``) - but for the differences in
  ``ALLOWED_ARGUMENTS`` and ``ALLOWED_ENV``, each with the reason it is allowed.
  Each difference is a row of the report; one without a reason is a problem, and so
  is any difference at all between stock and stock' (the null test's engines must be
  identical). An argument that differs stops the run before measuring; an
  environment that differs fails it. (The first harness let stock's dtype follow a
  CPU-only rule: stock ran in float32 beside a bf16 template.)
- :func:`backend_problem`: stock's default engine ran its default attention
  backend (FlashAttention on Hopper), not the one vLLM falls back to.
- :func:`null_problems`: the null test - stock against a second stock engine -
  whose interval must contain 1 for every metric; else the harness sees a
  difference between two identical engines and can decide nothing. The metrics
  are checked as one family (Bonferroni: each at ``1 - NULL_TEST_ALPHA / k``); the
  chance that two identical engines fail it is measured by simulation
  (``_e2e_stats.coverage``) and printed with the run, not assumed.
- :func:`busy_units`: units during which another engine's processes used CPU
  time (``_gpu_idle.py``): not measured alone. More than ``BUSY_UNITS_LIMIT`` of
  them fails the run.
- :func:`goals`: the issue's goals as verdicts of the harness (``_e2e_stats``):
  met, missed (with the interval) or unmet because stock's default-backend
  engine did not run.

Each returns plain lists and dicts, so the unit tests drive it with made-up
probe results (``tests/project/test_e2e_bench_checks.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from _e2e_stats import pair_ratios, t_interval

NULL_TEST_ALPHA = 0.05
"""The family-wise level the null test's intervals are built for (over all its metrics)."""

NULL_PAIR = ("stock", "stock'")
"""The null test's two engines: they may differ in nothing."""

ALLOWED_ARGUMENTS: dict[str, str] = {
    "attention_backend": "chooses the attention backend: the gpu-stock-triton candidate is "
    "stock with vLLM's Triton backend (stock's default engine sets none)",
    "additional_config": "the template's own options (additional_config.template, e.g. the "
    "fused model); vLLM's CudaPlatform reads none of it",
}
"""Engine arguments that may differ between engines, and why: they choose the platform's
options or its backend, which is what a candidate is."""

ALLOWED_ENV: dict[str, str] = {
    "VLLM_PLUGINS": "'none' turns the template's plugin off, so stock runs vLLM's own "
    "CudaPlatform: the platform under comparison",
    "VLLM_TEMPLATE_DEVICE": "selects the template's device (cuda): the platform under test",
    "VLLM_USE_FLASHINFER_SAMPLER": "'0' on stock keeps vLLM's CUDA top-k/top-p sampler from "
    "importing FlashInfer, absent on the machine; the harness samples greedily (temperature "
    "0), which never reaches that sampler, and the template platform never uses it",
    "VLLM_WORKER_MULTIPROC_METHOD": "'spawn' is set by the template platform itself while the "
    "engine is built (platform_hooks/mixin.py, _choose_start_method: a forked engine "
    "deadlocks in libgomp once torch ran on the CPU); it is part of the platform as users "
    "get it. The gpu-stock-spawn candidate measures stock with it",
}
"""Environment variables that may differ between engines, and why."""

# A unit during which another engine's process tree used more CPU than this (seconds per
# second of the unit) was not measured alone. An idle vLLM engine (probe and
# engine core) used 0.01-0.06 s in 1-5 s windows on the CPU machine (1.2 % of a core:
# timed waits); one that runs work uses a whole core.
IDLE_CPU_LIMIT = 0.05
# More units than this share not measured alone: the run fails.
BUSY_UNITS_LIMIT = 0.1

_ABSENT = "<absent>"


def _effective_env(engine: dict[str, Any]) -> dict[str, Any]:
    """The environment once the engine was built: as asked, then what building it changed."""
    env = dict(engine.get("env") or {})
    for key, value in (engine.get("env_changed") or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def differences(engines: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every argument and variable whose value is not the same for all engines: its
    ``part`` (``kwargs``, ``env`` as asked, ``env built`` as it stood once the engine was
    built), ``key``, each engine's ``values``, the ``reason`` it is allowed (None: it is not)."""
    names = sorted(engines)
    parts = {
        "kwargs": ({n: engines[n].get("kwargs") or {} for n in names}, ALLOWED_ARGUMENTS),
        "env": ({n: engines[n].get("env") or {} for n in names}, ALLOWED_ENV),
        "env built": ({n: _effective_env(engines[n]) for n in names}, ALLOWED_ENV),
    }
    rows = []
    for part, (values, allowed) in parts.items():
        for key in sorted({k for v in values.values() for k in v}):
            seen = {n: values[n].get(key, _ABSENT) for n in names}
            if len({repr(v) for v in seen.values()}) > 1:
                rows.append({"part": part, "key": key, "values": seen,
                             "reason": allowed.get(key)})  # fmt: skip
    return rows


def difference_problems(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The differences that fail the run: any without a reason, and any between the null
    test's two engines."""
    problems = []
    for row in rows:
        values = row["values"]
        shown = ", ".join(f"{n}={v!r}" for n, v in values.items())
        null = [values.get(n, _ABSENT) for n in NULL_PAIR if n in values]
        if len(null) == 2 and repr(null[0]) != repr(null[1]):
            problems.append(f"{row['part']}[{row['key']!r}] differs between stock and stock': "
                            f"{shown}")  # fmt: skip
        elif row["reason"] is None:
            problems.append(f"{row['part']}[{row['key']!r}] differs, not allowed: {shown}")
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


def null_level(metrics: int) -> float:
    """Each null-test metric's interval level: the family of ``metrics`` at 1 - alpha."""
    return 1 - NULL_TEST_ALPHA / max(metrics, 1)


def null_problems(null: dict[str, dict[str, Any]]) -> list[str]:
    """Metrics whose null-test interval (second stock over stock, from its quad ratios
    ``row["quads"]``, read as pairs) at the family-wise level does not contain 1."""
    level = null_level(len(null))
    problems = []
    for metric, row in null.items():
        pairs = pair_ratios(row["quads"])
        lo, hi = t_interval(pairs, level)
        if not lo <= 1.0 <= hi:
            problems.append(
                f"null test {metric}: stock'/stock {row['ratio']:.3f} over {len(pairs)} pairs, "
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
                    f"quad {u['quad']} {u['comparison']}, {u['engine']}: {other} used "
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

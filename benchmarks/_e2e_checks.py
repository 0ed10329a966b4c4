"""The checks that make ``gpu_e2e.py`` fail loudly instead of printing a flattering table.

- :func:`argument_differences`: every engine got the same engine arguments and
  environment but for the keys that choose the platform and its backends
  (``PLATFORM_KEYS``, ``PLATFORM_ENV``); anything else that differs is listed.
  (The first harness let stock's dtype follow a CPU-only rule: stock ran in
  float32 beside a bf16 template.)
- :func:`backend_problem`: stock's default engine ran its default attention
  backend (FlashAttention on Hopper), not the one vLLM falls back to.
- :func:`baseline_differences`: the harness's stock figures against stock
  measured the plain way (a fresh process, one engine, nothing else alive):
  more than ``BASELINE_TOLERANCE`` apart and the harness is not measuring stock.
- :func:`spread_failures`: any engine's rounds spread past ``SPREAD_LIMIT``
  (the benchmark measures such a round again first, a bounded number of times).
- :func:`idle_failures`: a measurement during which another engine's processes
  used CPU time (``_gpu_idle.py``): it was not measured alone.
- :func:`goals`: the issue's goals, each met, missed (by how much) or unmet
  because stock's default-backend engine did not run.

Each returns plain lists and dicts, so the unit tests drive it with made-up
probe results (``tests/unit/test_gpu_e2e_checks.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from _e2e_stats import spread

# Engine arguments that may differ between engines: they choose the platform and its
# backends (the template's own options ride in additional_config).
PLATFORM_KEYS = frozenset({"attention_backend", "additional_config"})
# Environment that selects the platform (the plugin off for stock, the template's device).
PLATFORM_ENV = frozenset({"VLLM_PLUGINS", "VLLM_USE_FLASHINFER_SAMPLER", "VLLM_TEMPLATE_DEVICE"})
BASELINE_TOLERANCE = 0.10
SPREAD_LIMIT = 0.25
# A measurement window in which another engine's process tree used more CPU than this
# (seconds per second of window) was not measured alone. An idle vLLM engine (probe and
# engine core) used 0.01-0.06 s in 1-5 s windows on the CPU machine (1.2 % of a core:
# timed waits); one that runs work uses a whole core.
IDLE_CPU_LIMIT = 0.05


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


def baseline_differences(
    harness: dict[str, Sequence[float]],
    plain: dict[str, Sequence[float]],
    tolerance: float = BASELINE_TOLERANCE,
) -> list[str]:
    """Metrics where the harness's median differs from the plain run's median by > tolerance."""
    import statistics

    problems: list[str] = []
    for metric, values in plain.items():
        if metric not in harness:
            problems.append(f"{metric}: measured the plain way but not in the harness")
            continue
        if len(values) < 3:
            problems.append(f"{metric}: the plain run has {len(values)} measurements, not 3+")
            continue
        got, want = statistics.median(harness[metric]), statistics.median(values)
        off = got / want - 1
        if abs(off) > tolerance:
            problems.append(
                f"{metric}: harness {got:.4g} vs stock alone {want:.4g} "
                f"({100 * off:+.0f} %, limit {100 * tolerance:.0f} %)"
            )
    return problems


def spread_failures(
    runs: dict[str, dict[str, list[float]]],
    metrics: Sequence[str],
    limit: float = SPREAD_LIMIT,
) -> list[str]:
    """Engines and metrics whose rounds spread more than ``limit``."""
    return [
        f"{engine} {metric}: rounds spread {100 * spread(figures[metric]):.0f} % "
        f"(limit {100 * limit:.0f} %): {[round(v, 4) for v in figures[metric]]}"
        for engine, figures in runs.items()
        for metric in metrics
        if len(figures.get(metric, [])) > 1 and spread(figures[metric]) > limit
    ]


def idle_failures(windows: Sequence[dict[str, Any]], limit: float = IDLE_CPU_LIMIT) -> list[str]:
    """Measurement windows in which another engine was not idle (``_gpu_idle.Window`` dicts)."""
    problems = []
    for w in windows:
        for other, cpu_s in w["others_cpu_s"].items():
            if cpu_s > limit * max(w["wall_s"], 1.0):
                problems.append(
                    f"round {w['round']}, {w['engine']} {w['op']}: {other} used "
                    f"{cpu_s:.3f} s of CPU in the {w['wall_s']:.2f} s window"
                )
    return problems


# The goals on the 1.1B shape (H100) and the 8B shape (H200): template engine
# over stock's default backend, per-step time ratio at most the bound.
# template / stock step time; W8A8 and MoE (issue 43): at least 0.9x stock's speed
STEP_GOALS = {
    "1.1b": {1: 0.91, 8: 0.8, 64: 0.8},
    "8b": {1: 0.91, 32: 0.91},
    "8b-w8a8": {1: 1 / 0.9, 32: 1 / 0.9},
    "mixtral-8l": {1: 1 / 0.9, 32: 1 / 0.9},
}
BANDWIDTH_GOALS = {"8b": {1: 0.85}}  # fraction of the bandwidth limit at batch 1


def goals(
    shape: str,
    ratios: dict[str, dict[str, dict[str, Any]]],
    fractions: dict[str, dict[int, float]],
    stock: str,
    template: str,
    stock_ran: bool,
) -> list[dict[str, Any]]:
    """Each goal of the shape: met, missed (with the figure) or unmet (stock did not run)."""
    out: list[dict[str, Any]] = []
    for batch, bound in STEP_GOALS.get(shape, {}).items():
        goal = f"{template} / {stock} step at batch {batch} <= {bound}"
        ratio = ratios.get(template, {}).get(f"step_ms_b{batch}")
        if not stock_ran:
            out.append({"goal": goal, "status": "unmet: stock's default backend did not run"})
        elif ratio is None:
            out.append({"goal": goal, "status": "unmet: not measured"})
        else:
            met = ratio["median"] <= bound
            out.append({"goal": goal, "status": "met" if met else "missed", "value": ratio})
    goal = f"{template} 2048-token prefill at least {stock}'s"
    prefill = ratios.get(template, {}).get("prefill_tok_s")
    if not stock_ran:
        out.append({"goal": goal, "status": "unmet: stock's default backend did not run"})
    elif prefill is not None:  # a time ratio: below 1 is faster
        status = "met" if prefill["median"] <= 1 else "missed"
        out.append({"goal": goal, "status": status, "value": prefill})
    for batch, bound in BANDWIDTH_GOALS.get(shape, {}).items():
        goal = f"{template} at batch {batch}: at least {bound:.0%} of the bandwidth limit"
        frac = fractions.get(template, {}).get(batch)
        if frac is None:
            out.append({"goal": goal, "status": "unmet: not measured"})
        else:
            status = "met" if frac >= bound else "missed"
            out.append({"goal": goal, "status": status, "value": frac})
    return out

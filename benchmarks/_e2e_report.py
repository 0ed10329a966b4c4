"""The printed report and the chart of ``gpu_e2e.py``: verdicts with their intervals.

Both read what ``gpu_e2e.py`` writes to its JSON: per comparison with stock (the
null test ``stock'`` and each candidate), every metric's geometric mean pair ratio,
Student-t 95 % interval and verdict, beside the interval's coverage measured by
simulation at the run's number of pairs; per engine, its own figures over its
units (median and range); the device rounds (span and kernel time of a decode
step: median and range over the rounds, and each candidate's ratio to stock's);
the bandwidth limit of each batch's step; the plan's seed, start order and cores;
and every difference between the engines' arguments and environments, each with
the reason it is allowed or the word that it is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NULL = "stock'"


def _label(metric: str, result: dict[str, Any]) -> str:
    if metric == "prefill_tok_s":
        return f"prefill {result['prefill']}"
    return f"b{metric.removeprefix('step_ms_b')} step"


def _ratio(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    lo, hi = row["interval"]
    return f"{row['ratio']:.3f} [{lo:.3f}, {hi:.3f}]"


def _spread(stat: dict[str, Any] | None, digits: int = 3) -> str:
    """``median [min-max]`` of a ``median_range``, or ``-``."""
    if not stat:
        return "-"
    lo, hi = stat["range"]
    return f"{stat['median']:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


def print_plan(result: dict[str, Any]) -> None:
    """The seed, the start order and the cores: what the positions were."""
    cores = result.get("cores")
    where = (
        f"units on cores {cores['measure']}, idle engines parked on {cores['park']}, "
        f"start cores {cores['start']}"
        if cores
        else "no pinning: every engine on every core"
    )
    print(f"\nplan: seed {result['seed']}; started in the order {', '.join(result['start_order'])}")
    print(f"  {where}")


def print_coverage(result: dict[str, Any]) -> None:
    """The interval's coverage as measured by simulated null runs, not as claimed."""
    rows = result.get("coverage") or []
    if not rows:
        return
    print(
        f"\ninterval coverage, measured on {rows[0]['runs']} simulated null runs of "
        f"{rows[0]['pairs']} pairs (_e2e_stats.coverage): one metric at 95 % / the null "
        f"test's family of {rows[0]['family_size']}"
    )
    for row in rows:
        print(f"  {row['one_metric']:.1%} / {row['family']:.1%}  {row['noise']}")


def print_differences(result: dict[str, Any]) -> None:
    """Every argument or variable that is not the same for all engines, and why."""
    rows = result.get("differences") or []
    print("\ndifferences between the engines (arguments, environment asked, as built):")
    if not rows:
        print("  none")
    for row in rows:
        values = ", ".join(f"{e}={v!r}" for e, v in row["values"].items())
        reason = row["reason"] or "NOT ALLOWED"
        print(f"  {row['part']} {row['key']}: {values}\n      {reason}")


def print_device(result: dict[str, Any]) -> None:
    """The device rounds: each engine's figures, each candidate's ratio to stock's."""
    gpu = result.get("gpu") or {}
    summary = gpu.get("summary")
    if not summary:
        return
    print(
        f"\non the device, {gpu['rounds_run']} of {gpu['rounds']} rounds: median [range] over "
        f"the rounds (the range of {summary['rounds']} rounds holds the median of their "
        f"distribution with probability {summary['range_coverage']:.1%}; no interval)"
    )
    for engine, rows in summary["ratios"].items():
        for batch, row in rows.items():
            print(
                f"  {engine} / stock {batch}: span {_spread(row.get('span_ms_per_step'))}"
                f"  kernels {_spread(row.get('kernel_ms_per_step'))}"
            )


def print_summary(result: dict[str, Any]) -> None:
    """Verdicts beside the null test's resolution; each engine's figures and the device's."""
    rates, summary = result["rates"], result["summary"]
    comparisons = summary["comparisons"]
    null = comparisons.get(NULL, {})
    print(
        f"\n{rates['device']}: copy {rates['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
        f"bf16 GEMM {rates['gemm_flops'] / 1e12:.0f} TFLOP/s; {result['shape']}, "
        f"{result['quads_run']} quads per comparison in {result['quads_run'] // 2} pairs "
        f"(ABBA+BAAB), margin {result['margin']:.0%}"
    )
    print_plan(result)
    print("\ntime ratio to stock: geometric mean of the pairs [Student-t 95 % interval] verdict")
    for candidate, metrics in comparisons.items():
        if candidate == NULL:
            continue
        print(f"\n{candidate} / stock")
        for metric, row in metrics.items():
            resolution = null.get(metric, {}).get("width")
            res = f"{resolution:.3f}" if resolution is not None else "-"
            print(
                f"  {_label(metric, result):<14} {_ratio(row):<26} {row['verdict']:<10}"
                f" null {_ratio(null.get(metric)):<26} resolution {res}"
            )
    print_coverage(result)
    print("\neach engine: host ms per decode step, median [range] over its units; on the device")
    device = (result.get("gpu") or {}).get("summary", {}).get("engines", {})
    for engine, metrics in summary["engines"].items():
        print(f"\n{engine} (init {result['engines'][engine]['init_s']} s)")
        for b in result["batches"]:
            stat = metrics[f"step_ms_b{b}"]
            on_device = device.get(engine, {}).get(f"b{b}", {})
            frac = summary["frac_of_limit"][engine][str(b)]
            print(
                f"  b{b:<3} host {_spread(stat)} ms"
                f"  span {_spread(on_device.get('span_ms_per_step'))} ms"
                f"  kernels {_spread(on_device.get('kernel_ms_per_step'))} ms"
                f"  limit {summary['limit_ms'][str(b)]:.3f} ms ({100 * frac:.0f}% of it)"
            )
        prefill = metrics["prefill_tok_s"]
        print(f"  prefill {result['prefill']} tokens: {prefill['median']:.0f} tok/s")
    print_device(result)
    print_differences(result)
    print("\nresolved configuration (worker side):")
    keys = ("dtype", "attention_backends", "cudagraph_mode", "max_num_batched_tokens")
    for engine, info in result["engines"].items():
        resolved = info.get("resolved") or {}
        print(f"  {engine}: " + ", ".join(f"{k}={resolved.get(k)}" for k in keys))


def headline(result: dict[str, Any]) -> str:
    """The chart's headline on the self-check: its outcome and how many findings it printed."""
    check = result.get("self_check") or {}
    if check.get("passed"):
        return "null test passed"
    found = len(check.get("problems", []))
    return f"SELF-CHECK FAILED ({found} findings): not a comparison of engines"


def chart(result: dict[str, Any], path: Path) -> None:
    """Left: each comparison's ratio with its interval, the margin shaded.
    Right: each engine's host step time beside its device span, kernel time and the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary, batches, margin = result["summary"], result["batches"], result["margin"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    comparisons = summary["comparisons"]
    metrics = [f"step_ms_b{b}" for b in batches] + ["prefill_tok_s"]
    left.axhspan(1 - margin, 1 + margin, color="lightgray", alpha=0.5, label=f"±{margin:.0%}")
    left.axhline(1.0, color="black", linewidth=0.8)
    width = 0.8 / max(len(comparisons), 1)
    for i, (name, rows) in enumerate(comparisons.items()):
        xs = [j + i * width for j in range(len(metrics))]
        mids = [rows[m]["ratio"] for m in metrics]
        lows = [mid - rows[m]["interval"][0] for mid, m in zip(mids, metrics, strict=True)]
        highs = [rows[m]["interval"][1] - mid for mid, m in zip(mids, metrics, strict=True)]
        errs = [lows, highs]
        left.errorbar(xs, mids, yerr=errs, fmt="o", capsize=4, label=f"{name} / stock")
    left.set_xticks(
        [j + width * (len(comparisons) - 1) / 2 for j in range(len(metrics))],
        [_label(m, result) for m in metrics],
    )
    left.set_ylabel("time / stock's (geometric mean of pairs, t 95 % interval)")
    left.legend(fontsize=7)

    engines = [e for e in summary["engines"] if e != NULL]
    device = (result.get("gpu") or {}).get("summary", {}).get("engines", {})
    width = 0.8 / (len(engines) + 1)
    for i, engine in enumerate(engines):
        xs = [j + i * width for j in range(len(batches))]
        host = [summary["engines"][engine][f"step_ms_b{b}"]["median"] for b in batches]
        right.bar(xs, host, width, label=f"{engine} host", color=f"C{i}", alpha=0.6)
        for key, marker in (("span_ms_per_step", "_"), ("kernel_ms_per_step", "x")):
            stats = [device.get(engine, {}).get(f"b{b}", {}).get(key) for b in batches]
            values = [s["median"] if s else None for s in stats]
            points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
            if points:
                label = f"device {key.split('_')[0]}" if i == 0 else None
                xy = list(zip(*points, strict=True))
                right.scatter(xy[0], xy[1], marker=marker, s=120, color="black", label=label)
    xs = [j + len(engines) * width for j in range(len(batches))]
    limits = [summary["limit_ms"][str(b)] for b in batches]
    right.bar(xs, limits, width, label="bandwidth limit", color="lightgray", hatch="//")
    right.set_xticks(
        [j + 0.4 - width / 2 for j in range(len(batches))], [f"batch {b}" for b in batches]
    )
    right.set_ylabel("ms per decode step (medians: host; device span _ and kernels x)")
    right.legend(fontsize=7)
    fig.suptitle(
        f"{result['shape']} Llama, bf16, {result['rates']['device']}: {result['quads_run']} "
        f"quads per comparison; {headline(result)}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)

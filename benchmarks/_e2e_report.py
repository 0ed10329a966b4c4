"""The printed table and the chart of ``gpu_e2e.py``: verdicts with their intervals.

Both read the ``summary`` that ``gpu_e2e.py`` writes to its JSON: per comparison
with stock (the null test ``stock'`` and each candidate), every metric's median
quad ratio, bootstrap 95 % interval and verdict; per engine, its own figures over
its units (median and range); the device-side pass (span and kernel time of a
decode step) and the bandwidth limit of each batch's step.
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
    return f"{row['median']:.3f} [{lo:.3f}, {hi:.3f}]"


def print_summary(result: dict[str, Any]) -> None:
    """Verdicts beside the null test's resolution; each engine's figures and the device's."""
    rates, summary = result["rates"], result["summary"]
    comparisons = summary["comparisons"]
    null = comparisons.get(NULL, {})
    print(
        f"\n{rates['device']}: copy {rates['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
        f"bf16 GEMM {rates['gemm_flops'] / 1e12:.0f} TFLOP/s; {result['shape']}, "
        f"{result['quads_run']} quads per comparison (ABBA/BAAB), margin {result['margin']:.0%}"
    )
    print("\ntime ratio to stock: median [bootstrap 95 % interval] verdict")
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
    print("\neach engine: host ms per decode step, median [range] over its units; on the device")
    gpu = result.get("gpu", {})
    for engine, metrics in summary["engines"].items():
        print(f"\n{engine} (init {result['engines'][engine]['init_s']} s)")
        for b in result["batches"]:
            stat = metrics[f"step_ms_b{b}"]
            lo, hi = stat["range"]
            device = gpu.get(engine, {}).get(f"b{b}", {})
            span, kern = device.get("span_ms_per_step"), device.get("kernel_ms_per_step")
            frac = summary["frac_of_limit"][engine][str(b)]
            print(
                f"  b{b:<3} host {stat['median']:.3f} [{lo:.3f}-{hi:.3f}] ms"
                f"  span {span if span is None else round(span, 3)} ms"
                f"  kernels {kern if kern is None else round(kern, 3)} ms"
                f"  limit {summary['limit_ms'][str(b)]:.3f} ms ({100 * frac:.0f}% of it)"
            )
        prefill = metrics["prefill_tok_s"]
        print(f"  prefill {result['prefill']} tokens: {prefill['median']:.0f} tok/s")
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
    """Left: each comparison's median ratio with its interval, the margin shaded.
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
        mids = [rows[m]["median"] for m in metrics]
        lows = [mid - rows[m]["interval"][0] for mid, m in zip(mids, metrics, strict=True)]
        highs = [rows[m]["interval"][1] - mid for mid, m in zip(mids, metrics, strict=True)]
        errs = [lows, highs]
        left.errorbar(xs, mids, yerr=errs, fmt="o", capsize=4, label=f"{name} / stock")
    left.set_xticks(
        [j + width * (len(comparisons) - 1) / 2 for j in range(len(metrics))],
        [_label(m, result) for m in metrics],
    )
    left.set_ylabel("time / stock's (median quad ratio, 95 % interval)")
    left.legend(fontsize=7)

    engines = [e for e in summary["engines"] if e != NULL]
    gpu = result.get("gpu", {})
    width = 0.8 / (len(engines) + 1)
    for i, engine in enumerate(engines):
        xs = [j + i * width for j in range(len(batches))]
        host = [summary["engines"][engine][f"step_ms_b{b}"]["median"] for b in batches]
        right.bar(xs, host, width, label=f"{engine} host", color=f"C{i}", alpha=0.6)
        for key, marker in (("span_ms_per_step", "_"), ("kernel_ms_per_step", "x")):
            values = [gpu.get(engine, {}).get(f"b{b}", {}).get(key) for b in batches]
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
    right.set_ylabel("ms per decode step (host median; device span _ and kernels x)")
    right.legend(fontsize=7)
    fig.suptitle(
        f"{result['shape']} Llama, bf16, {result['rates']['device']}: {result['quads_run']} "
        f"quads per comparison; {headline(result)}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)

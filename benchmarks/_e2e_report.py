"""The printed table and the chart of ``gpu_e2e.py``: medians with their min-max range.

Both read the ``summary`` that ``gpu_e2e.py`` writes to its JSON: per engine,
each metric's ``median``/``range`` over rounds, the per-round ratios against
stock's default backend (``vs_stock``) and against stock's Triton backend
(``vs_stock_triton``), and the bandwidth limit of each batch's decode step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _cell(stat: dict[str, Any] | None, fmt: str) -> str:
    if stat is None:
        return "-"
    lo, hi = stat["range"]
    return f"{stat['median']:{fmt}} [{lo:{fmt}}-{hi:{fmt}}]"


def print_summary(result: dict[str, Any]) -> None:
    """Table of step times, ratios to stock and prefill; then the resolved configs."""
    rates, summary, batches = result["rates"], result["summary"], result["batches"]
    print(
        f"\n{rates['device']}: copy {rates['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
        f"bf16 GEMM {rates['gemm_flops'] / 1e12:.0f} TFLOP/s; {result['rounds']} rounds"
    )
    for engine, row in summary.items():
        print(f"\n{engine} (init {row['init_s']} s)")
        for b in batches:
            key = f"step_ms_b{b}"
            line = f"  b{b:<3} step ms {_cell(row['metrics'].get(key), '.3f'):<26}"
            line += f" x stock {_cell(row.get('vs_stock', {}).get(key), '.2f'):<20}"
            line += f" x stock-triton {_cell(row.get('vs_stock_triton', {}).get(key), '.2f'):<20}"
            line += f" {100 * row['frac_of_limit'][str(b)]:.0f}% of limit"
            print(line)
        key = "prefill_tok_s"
        print(
            f"  prefill {result['prefill']} tok/s {_cell(row['metrics'].get(key), '.0f')}"
            f"  time x stock {_cell(row.get('vs_stock', {}).get(key), '.2f')}"
        )
    print("\n(medians [min-max] over rounds; x stock = engine / stock time, per-round ratios)")
    print("\nresolved configuration (worker side):")
    keys = ("dtype", "attention_backends", "max_num_batched_tokens", "cudagraph_mode")
    for engine, info in result["engines"].items():
        resolved = info.get("resolved", {})
        steps = result["prefill_diag"].get(engine, {}).get("steps")
        print(
            f"  {engine}: "
            + ", ".join(f"{k}={resolved.get(k)}" for k in keys)
            + (f", prefill steps={[s['tokens'] for s in steps]}" if steps else "")
        )


def verdict(result: dict[str, Any]) -> str:
    """The chart's headline on the self-check: its outcome and how many findings it printed."""
    check = result.get("self_check") or {}
    if check.get("passed"):
        return "self-check passed"
    found = len(check.get("problems", []))
    return f"SELF-CHECK FAILED ({found} findings): not a comparison of engines"


def chart(result: dict[str, Any], path: Path) -> None:
    """Step times with min-max error bars beside the bandwidth limit; ratios to stock."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary, batches = result["summary"], result["batches"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / (len(summary) + 1)
    for i, (engine, row) in enumerate(summary.items()):
        xs = [j + i * width for j in range(len(batches))]
        stats = [row["metrics"][f"step_ms_b{b}"] for b in batches]
        mids = [s["median"] for s in stats]
        errs = [[m - s["range"][0] for m, s in zip(mids, stats, strict=True)],
                [s["range"][1] - m for m, s in zip(mids, stats, strict=True)]]  # fmt: skip
        left.bar(xs, mids, width, yerr=errs, capsize=3, label=engine, color=f"C{i}")
    first = next(iter(summary.values()))
    xs = [j + len(summary) * width for j in range(len(batches))]
    limits = [first["limit_ms"][str(b)] for b in batches]
    left.bar(xs, limits, width, label="bandwidth limit", color="lightgray", hatch="//")
    ticks = [j + 0.4 - width / 2 for j in range(len(batches))]
    left.set_xticks(ticks, [f"batch {b}" for b in batches])
    left.set_ylabel("ms per decode step (median, min-max bars)")
    left.legend(fontsize=7)

    metrics = [f"step_ms_b{b}" for b in batches] + ["prefill_tok_s"]
    labels = [f"b{b} step" for b in batches] + [f"prefill {result['prefill']}"]
    colour = {e: f"C{i}" for i, e in enumerate(summary)}  # as in the left panel
    others = [e for e, row in summary.items() if row.get("vs_stock")]
    width = 0.8 / max(len(others), 1)
    for i, engine in enumerate(others):
        ratios = summary[engine]["vs_stock"]
        xs = [j + i * width for j in range(len(metrics))]
        mids = [ratios[m]["median"] if m in ratios else 0 for m in metrics]
        pairs = list(zip(mids, metrics, strict=True))
        errs = [[m - ratios[k]["range"][0] if k in ratios else 0 for m, k in pairs],
                [ratios[k]["range"][1] - m if k in ratios else 0 for m, k in pairs]]  # fmt: skip
        right.bar(xs, mids, width, yerr=errs, capsize=3, label=engine, color=colour[engine])
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set_xticks([j + 0.4 - width / 2 for j in range(len(metrics))], labels)
    right.set_ylabel("time / stock's default backend (median, min-max bars)")
    right.legend(fontsize=7)
    fig.suptitle(
        f"{result['shape']} Llama, bf16, {result['rates']['device']}: each engine alone, "
        f"{result['rounds']} rounds; {verdict(result)}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)

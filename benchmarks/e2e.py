"""Template CPU platform against stock vLLM CPU: decode, prefill, TTFT, init - one run.

Each variant starts its own engine in a fresh process (fresh compile cache:
init is cold). Variants run in alternating order over ``--rounds`` rounds and
the table shows medians plus template/stock ratios::

    python benchmarks/e2e.py --size small --rounds 2 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from _common import machine, print_table, run_probe

DEFAULT_VARIANTS = ("stock", "template-graph", "template-fusion_only")
METRICS = ("decode_tok_s_b1", "decode_tok_s_b8", "prefill_tok_s", "ttft_ms", "init_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="small", choices=("tiny", "small"))
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--json", metavar="FILE", help="also write all figures as JSON")
    args = parser.parse_args()

    variants = args.variants.split(",")
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for round_index in range(args.rounds):
        order = variants if round_index % 2 == 0 else list(reversed(variants))
        for variant in order:
            spec = {"variant": variant, "size": args.size, "batch": args.batch}
            result = run_probe(spec)
            print(f"round {round_index + 1}: {json.dumps(result)}", flush=True)
            runs[variant].append(result)

    summary = []
    for variant in variants:
        row: dict[str, Any] = {"variant": variant}
        for metric in METRICS:
            row[metric] = round(statistics.median(r[metric] for r in runs[variant]), 2)
        summary.append(row)
    stock = next((r for r in summary if r["variant"] == "stock"), None)
    if stock:
        for row in summary:
            for metric in METRICS:
                ratio = row[metric] / stock[metric] if stock[metric] else float("nan")
                row[f"{metric}/stock"] = round(ratio, 2)
    print(f"\nmachine: {machine()}; model {args.size}; medians of {args.rounds} rounds\n")
    print_table(summary, ["variant", *METRICS])
    if stock:
        print()
        print_table(summary, ["variant", *[f"{m}/stock" for m in METRICS]])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"machine": machine(), "size": args.size, "runs": runs, "summary": summary},
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()

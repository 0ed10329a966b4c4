"""Template CPU platform against stock vLLM CPU: decode, prefill, TTFT, init - one run.

Every variant's engine starts in its own fresh process (fresh compile cache:
init is cold), one after the other, and stays alive. Then the measurements
interleave: each round asks every variant in turn (alternating order) for one
batch-1 decode, one batch-N decode and one prefill, so that the slow speed
drifts of a shared machine hit all variants alike. The table shows medians
over rounds plus template/stock ratios::

    python benchmarks/e2e.py --size small --rounds 7 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from _common import EngineProbe, machine, print_table

DEFAULT_VARIANTS = ("stock", "template-graph", "template-fusion_only", "template-fused-model")
METRICS = ("decode_tok_s_b1", "decode_tok_s_bN", "prefill_tok_s", "ttft_ms", "init_s")
# vLLM's worker spins for 1 s after its last message (shm_broadcast busy loop);
# let an engine go idle before the next one is timed.
SETTLE_S = 1.2


def measure_round(probe: EngineProbe, args: argparse.Namespace, seed: int) -> dict[str, float]:
    b1 = probe.ask(op="decode", batch=1, tokens=args.decode_tokens, seed=seed)
    time.sleep(SETTLE_S)
    bn = probe.ask(op="decode", batch=args.batch, tokens=args.decode_tokens, seed=seed)
    time.sleep(SETTLE_S)
    prefill = probe.ask(op="prefill", length=args.prefill_len, seed=seed)
    time.sleep(SETTLE_S)
    return {
        "decode_tok_s_b1": b1["decode_tok_s"],
        "ttft_ms": b1["ttft_ms"],
        "decode_tok_s_bN": bn["decode_tok_s"],
        "prefill_tok_s": prefill["prefill_tok_s"],
    }


def summarize(
    variant: str, inits: dict[str, float], runs: dict[str, list[dict[str, float]]]
) -> dict[str, Any]:
    """Medians per metric, and ratios to stock paired round by round.

    A shared machine's speed drifts by tens of percent over minutes; the ratio
    of two measurements taken seconds apart is far steadier than the ratio of
    two medians.
    """
    row: dict[str, Any] = {"variant": variant, "init_s": inits[variant]}
    for metric in METRICS[:-1]:
        row[metric] = round(statistics.median(r[metric] for r in runs[variant]), 1)
    if "stock" not in runs:
        return row
    for metric in METRICS[:-1]:
        ratios = [
            mine[metric] / theirs[metric]
            for mine, theirs in zip(runs[variant], runs["stock"], strict=True)
        ]
        row[f"{metric}/stock"] = (
            f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
        )
    row["init_s/stock"] = f"{inits[variant] / inits['stock']:.2f}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="small", choices=("tiny", "small"))
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8, help="N of the batch-N decode")
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--prefill-len", type=int, default=512)
    parser.add_argument("--json", metavar="FILE", help="also write all figures as JSON")
    args = parser.parse_args()

    variants = args.variants.split(",")
    probes: dict[str, EngineProbe] = {}
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    try:
        for variant in variants:
            probes[variant] = EngineProbe({"variant": variant, "size": args.size})
            print(f"started {variant}: init {probes[variant].init['init_s']} s", flush=True)
            time.sleep(SETTLE_S)
        for round_index in range(args.rounds):
            order = variants if round_index % 2 == 0 else list(reversed(variants))
            for variant in order:
                result = measure_round(probes[variant], args, seed=1000 * round_index)
                runs[variant].append(result)
                print(f"round {round_index + 1} {variant}: {json.dumps(result)}", flush=True)
    finally:
        for probe in probes.values():
            probe.close()

    inits = {variant: float(probe.init["init_s"]) for variant, probe in probes.items()}
    summary = [summarize(variant, inits, runs) for variant in variants]
    print(
        f"\nmachine: {machine()}; model {args.size}; batch N={args.batch}; "
        f"{args.decode_tokens} decode tokens; medians of {args.rounds} interleaved rounds\n"
    )
    print_table(summary, ["variant", *METRICS])
    if "stock" in runs:
        print(
            "\ntemplate/stock: median of per-round ratios (each round's variants ran"
            " back to back), [min-max] over rounds; init: one cold start each\n"
        )
        print_table(summary, ["variant", *[f"{m}/stock" for m in METRICS]])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "machine": machine(),
                    "args": vars(args),
                    "init_s": inits,
                    "runs": runs,
                    "summary": summary,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()

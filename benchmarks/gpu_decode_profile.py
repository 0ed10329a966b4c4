"""Where a decode step's GPU time goes: stock vLLM CUDA beside the template, kernel by kernel.

    python benchmarks/gpu_decode_profile.py --shape 8b --batches 1,32 --rounds 3 --json out.json

The engines (``gpu_e2e.py``'s ``stock`` and each of ``--candidates``, default
``gpu-template``; the same engine arguments as its quads but for the platform) start
side by side, then each is profiled alone while the others idle, ``--rounds`` times in
turn (the order reversed every other round): per batch, after one unmeasured generation,
a ``LONG``- and a ``SHORT``-token generation after a ``PROMPT``-token prompt under the
torch profiler in the worker (``_engine_probe.py``'s ``decode_profile``); a kernel's time
per decode step is its long figure less its short one over ``LONG - SHORT``. Printed per
batch: the kernel time and launches per step of each engine, then per kernel family
(``_bench_worker.KERNEL_FAMILIES``) side by side, each candidate over stock, medians and
ranges over the rounds; then each engine's heaviest kernels per step. Speed verdicts are
``gpu_e2e.py``'s: this tells where to look. Needs stock's compiled files
(``tools/gpu_tier.sh`` installs them). Its arithmetic: ``tests/project/test_decode_profile.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _bench_worker import kernel_family
from _common import EngineProbe, machine
from gpu_e2e import ENGINE_VARIANTS, EXTENSION, LONG, PREFILL, PROMPT, SHORT

STOCK = "stock"


def spec(engine: str, shape: str, batches: list[int]) -> dict[str, Any]:
    """``gpu_e2e.py``'s engine arguments (its defaults), cores not pinned."""
    return {
        "variant": ENGINE_VARIANTS.get(engine, engine),
        "shape": shape,
        "dtype": "bfloat16",
        "kv_cache_mib": 4096,
        "max_num_seqs": max(batches),
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.2,
        "max_model_len": PREFILL + 256,
        "worker_extension_cls": EXTENSION,
    }


def families(kernels: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per-step time (ms) and launches of each kernel family."""
    out: dict[str, dict[str, float]] = {}
    for name, k in kernels.items():
        family = out.setdefault(kernel_family(name), {"ms": 0.0, "launches": 0.0})
        family["ms"] += k["ms"]
        family["launches"] += k["launches"]
    return out


def profile(
    probes: dict[str, EngineProbe], batches: list[int], rounds: int
) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Each engine's ``decode_profile`` answers per batch, one per round."""
    out: dict[str, dict[int, list[dict[str, Any]]]] = {e: {b: [] for b in batches} for e in probes}
    order = list(probes)
    for r in range(rounds):
        for engine in order if r % 2 == 0 else order[::-1]:
            for batch in batches:
                answer = probes[engine].ask(
                    op="decode_profile", batch=batch, prompt=PROMPT, short=SHORT, long=LONG
                )
                out[engine][batch].append(answer)
                print(f"round {r}, {engine}, batch {batch}: {answer['kernel_ms_per_step']:.3f} "
                      f"ms of kernels per step", file=sys.stderr)  # fmt: skip
    return out


def _stat(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def _family_cells(fams: list[dict[str, dict[str, float]]], name: str) -> tuple[list[float], float]:
    """One family's ms per step in each round and its median launches per step."""
    ms = [f.get(name, {"ms": 0.0})["ms"] for f in fams]
    return ms, statistics.median(f.get(name, {"launches": 0.0})["launches"] for f in fams)


def report(results: dict[str, dict[int, list[dict[str, Any]]]], top: int = 25) -> dict[str, Any]:
    """Print the tables of the module docstring; return the per-family medians by batch,
    candidate and family (ms and launches per step, and the candidate over stock)."""
    summary: dict[str, Any] = {}
    candidates = [e for e in results if e != STOCK]
    for batch in results[STOCK]:
        runs = {e: results[e][batch] for e in results}
        fams = {e: [families(r["kernels"]) for r in runs[e]] for e in runs}
        print(
            f"\n== batch {batch}: kernel ms per decode step, median [range] of {len(runs[STOCK])}"
        )
        for e in runs:
            total = [r["kernel_ms_per_step"] for r in runs[e]]
            launches = statistics.median(r["launches_per_step"] for r in runs[e])
            print(f"  {e:<20} {_stat(total)} ms, {launches:.0f} launches per step")
        summary[str(batch)] = {}
        for c in candidates:
            ratios = [
                a["kernel_ms_per_step"] / b["kernel_ms_per_step"]
                for a, b in zip(runs[c], runs[STOCK], strict=True)
            ]
            print(f"  {c} / stock, round by round: {_stat(ratios)}")
            names = {n for e in (c, STOCK) for f in fams[e] for n in f}
            order = sorted(
                names, key=lambda n: -statistics.median(_family_cells(fams[STOCK], n)[0])
            )
            print(f"  {'family':<24} {c + ' ms':>26} {'launches':>8}   {'stock ms':>26} "
                  f"{'launches':>8}   ratio of medians")  # fmt: skip
            rows = {}
            for name in order:
                (a_ms, a_n), (b_ms, b_n) = (_family_cells(fams[c], name),
                                            _family_cells(fams[STOCK], name))  # fmt: skip
                a, b = statistics.median(a_ms), statistics.median(b_ms)
                ratio = a / b if b > 0 else None
                rows[name] = {"ms": a, "launches": a_n, "stock_ms": b, "stock_launches": b_n,
                              "ratio": ratio}  # fmt: skip
                print(f"  {name:<24} {_stat(a_ms):>26} {a_n:8.1f}   {_stat(b_ms):>26} {b_n:8.1f}   "
                      f"{f'{ratio:.3f}' if ratio is not None else '-'}")  # fmt: skip
            summary[str(batch)][c] = rows
        for e in runs:
            every = set().union(*(r["kernels"] for r in runs[e]))
            med = {
                n: statistics.median(r["kernels"].get(n, {"ms": 0.0})["ms"] for r in runs[e])
                for n in every
            }
            print(f"  {e}: heaviest kernels per step (median ms, launches per step, family)")
            for n in sorted(med, key=lambda n: -med[n])[:top]:
                launches = statistics.median(
                    r["kernels"].get(n, {"launches": 0.0})["launches"] for r in runs[e]
                )
                print(f"    {med[n]:7.4f} ms  x{launches:5.2f}  {kernel_family(n):<10} {n[:110]}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="8b")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--candidates", default="gpu-template", help="engines beside stock")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    print(machine(), file=sys.stderr)
    engines = [STOCK, *args.candidates.split(",")]
    probes = {e: EngineProbe(spec(e, args.shape, batches), wait=False) for e in engines}
    init = {}
    try:
        for engine, probe in probes.items():
            init[engine] = probe.wait_init()
            print(f"{engine}: started in {init[engine]['init_s']} s", file=sys.stderr)
        results = profile(probes, batches, args.rounds)
    finally:
        for probe in probes.values():
            probe.quit()
        for probe in probes.values():
            probe.close()
    summary = report(results)
    if args.json:
        args.json.write_text(json.dumps({
            "shape": args.shape, "batches": batches, "prompt": PROMPT, "short": SHORT,
            "long": LONG, "rounds": args.rounds, "machine": machine(),
            "resolved": {e: i.get("resolved") for e, i in init.items()},
            "summary": summary, "results": results,
        }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()

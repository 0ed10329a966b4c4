"""Where a long prefill's GPU time goes: stock vLLM CUDA beside the template, kernel by kernel.

    python benchmarks/gpu_prefill_profile.py --shape 8b --length 2048 --json out.json

Both engines (``gpu_e2e.py``'s ``stock`` and ``gpu-template``, the same arguments but for
the platform) start side by side, then each is profiled alone while the other idles:
``--rounds`` times, one ``--length``-token prefill with one output token, warmed twice,
under the torch profiler in the worker (``_engine_probe.py``'s ``prefill_profile``).
Printed per engine: the wall time of the profiled call (the profiler's own host work
inflates it: read kernel times, not speed), the GPU kernel time, the launches, the time
per kernel family (``_bench_worker.KERNEL_FAMILIES``) and the heaviest kernels; then the
families side by side, template over stock. Speed verdicts are ``gpu_e2e.py``'s: this
tells where to look. Needs stock's compiled files (``tools/gpu_tier.sh`` installs them).
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

from _common import EngineProbe, machine
from gpu_e2e import ENGINE_VARIANTS, EXTENSION

ENGINES = ("stock", "gpu-template")


def spec(engine: str, shape: str, length: int) -> dict[str, Any]:
    return {
        "variant": ENGINE_VARIANTS.get(engine, engine),
        "shape": shape,
        "dtype": "bfloat16",
        "kv_cache_mib": 4096,
        "max_num_seqs": 8,
        "max_num_batched_tokens": max(8192, length),
        "gpu_memory_utilization": 0.4,
        "max_model_len": length + 256,
        "worker_extension_cls": EXTENSION,
    }


def profile(probes: dict[str, EngineProbe], length: int, rounds: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {e: [] for e in probes}
    for _ in range(rounds):
        for engine, probe in probes.items():
            out[engine].append(probe.ask(op="prefill_profile", length=length))
    return out


def report(results: dict[str, list[dict]], length: int) -> None:
    families: dict[str, dict[str, float]] = {}
    for engine, runs in results.items():
        gpu = statistics.median(r["gpu_ms"] for r in runs)
        wall = statistics.median(r["wall_ms"] for r in runs)
        print(f"\n{engine}: {length}-token prefill, median of {len(runs)}: GPU kernels "
              f"{gpu:.3f} ms ({length / gpu * 1000:,.0f} tok/s on the device), "
              f"{runs[0]['launches']} launches, profiled call {wall:.2f} ms")  # fmt: skip
        names = {name for r in runs for name in r["categories"]}
        families[engine] = {n: statistics.median(r["categories"].get(n, 0.0) for r in runs)
                            for n in names}  # fmt: skip
        for name, ms in sorted(families[engine].items(), key=lambda kv: -kv[1]):
            print(f"  {name:<26} {ms:8.3f} ms  {100 * ms / gpu:5.1f} %")
        print("  heaviest kernels (first round):")
        for k in runs[0]["top_kernels"]:
            print(f"    {k['ms']:8.3f} ms  x{k['count']:<4} {k['name']}")
    if len(families) == 2:
        ours, stock = families["gpu-template"], families["stock"]
        print("\nper family, template / stock (ms):")
        for name in sorted(set(ours) | set(stock), key=lambda n: -stock.get(n, 0.0)):
            a, b = ours.get(name, 0.0), stock.get(name, 0.0)
            ratio = f"{a / b:.2f}" if b else "-"
            print(f"  {name:<26} {a:8.3f} / {b:8.3f}  {ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="8b")
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(machine(), file=sys.stderr)
    probes = {e: EngineProbe(spec(e, args.shape, args.length), wait=False) for e in ENGINES}
    try:
        for engine, probe in probes.items():
            print(f"{engine}: started in {probe.wait_init()['init_s']} s", file=sys.stderr)
        results = profile(probes, args.length, args.rounds)
    finally:
        for probe in probes.values():
            probe.quit()
        for probe in probes.values():
            probe.close()
    report(results, args.length)
    if args.json:
        args.json.write_text(json.dumps({"shape": args.shape, "length": args.length,
                                         "results": results}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()

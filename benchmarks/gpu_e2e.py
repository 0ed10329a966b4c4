"""vLLM end to end on a CUDA GPU: the template beside stock vLLM, a verdict per metric.

    python benchmarks/gpu_e2e.py --shape 1.1b --json out.json --chart out.png

Engines (``_engine_probe.py`` variants, one process each, ``bench_shapes.py``'s shape
with vLLM's dummy weights, bf16): ``stock`` (vLLM's ``CudaPlatform``, its default
attention backend: FlashAttention 3 on Hopper), ``stock'`` (a second, identical stock
engine: the null test) and each candidate of ``--candidates`` (default
``gpu-template``, the platform's default FULL_AND_PIECEWISE). Stock needs vLLM's
compiled files (``tools/gpu_tier.sh bench-e2e`` installs them). Every engine gets the
same arguments but for the platform and its backend; the run stops before measuring
if the arguments differ, and fails if the environment they started with does
(``_e2e_checks.argument_differences``).

**Quads.** All engines start side by side and stay alive, each on its own equal set of
cores (``--no-pin``: shared). Each comparison with stock (the null test and every
candidate) is ``--quads`` quads (12; a fixed number, decided before any figure is seen:
no stopping when it looks good, nothing trimmed or replaced), each four units in the
order A B B A or B A A B (A: stock, B: the other). Per comparison an ABBA quad then a
BAAB one, comparison after comparison: every quad starts right after another engine's
unit, so in every quad each engine has exactly one unit that follows its own (on the
H100 such a unit ran about 3 % faster). A unit is one short job: per batch
``--unit-repeats`` (3) ``SHORT``- and ``LONG``-token generations each after a
``PROMPT``-token prompt (alternating, which goes first alternates unit by unit), then as
many ``PREFILL``-token prefills; the fastest of each kind counts (the host's jitter only
adds time; single generations spread by 17 % on the H100). Its figures: the decode step
time per batch, ``(t_long - t_short) / (LONG - SHORT)``, and the prefill rate. Before a
unit the other engines are waited on until they use no CPU, and their CPU time across
the unit is recorded (``_gpu_idle.Window``); every unit keeps its wall-clock start and
end. Per quad and metric the ratio is the geometric mean of B's two units over A's;
over the quads, its median and a bootstrap 95 % interval, and a verdict at
``--margin``: faster / same / slower, or undecided (``_e2e_stats.py``).

**The self-check is the null test**: stock'/stock's interval must contain 1 for every
metric (the metrics as one family, Bonferroni: ``_e2e_checks.null_problems``), and its
95 % width is the harness's resolution on this machine, printed beside every verdict.
The run also fails when more than ``BUSY_UNITS_LIMIT`` of the units had another engine
busy, when an engine did not start, or when stock's default
engine ran another backend than ``--stock-backend`` (vLLM falls back to Triton
silently when FlashAttention's compiled file does not load).

**On the device**, after the quads, each engine alone (others idle): per batch, the
span of a decode step on the GPU's clock (CUDA events at the start and the end of the
runner's step, in the worker extension all engines share: kernels and the gaps between
them) and, in a separate pass under the torch profiler, the kernel time per step (a
long generation's kernel sum minus a short one's, over the steps between). They tell
kernel quality; the host step time of the quads tells what a user waits for. The
bandwidth limit of a step is the bytes it must read (weights, then each request's KV
cache) over the device's copy rate (``dst.copy_(src)`` of 1 GiB, read + write)
measured in this run; an 8192^3 bf16 matmul gives the GEMM rate beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import EngineProbe, machine
from _e2e_checks import (
    BUSY_UNITS_LIMIT,
    IDLE_CPU_LIMIT,
    argument_differences,
    backend_problem,
    busy_units,
    goals,
    null_problems,
)
from _e2e_report import chart, print_summary
from _e2e_stats import ORDERS, compare, median_range, quad_ratio
from _gpu_idle import Window
from bench_shapes import SHAPES, kv_bytes_per_token, weight_bytes

STOCK, NULL = "stock", "stock'"
ENGINE_VARIANTS = {STOCK: "gpu-stock", NULL: "gpu-stock"}
CANDIDATES = ("gpu-template", "gpu-template-fused", "gpu-stock-triton")
BATCHES = {"1.1b": (1, 8, 64), "8b": (1, 32), "8b-w8a8": (1, 32), "mixtral-8l": (1, 32)}
PROMPT, SHORT, LONG = 128, 16, 144
PREFILL = 2048
EXTENSION = "_bench_worker.BenchWorkerExtension"


def device_rates() -> dict[str, Any]:
    """Copy rate (bytes read + written per second) and bf16 GEMM FLOP/s of this GPU."""
    import torch
    import triton.testing

    src = torch.empty(1 << 29, dtype=torch.float16, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=200)
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn_like(a)
    gemm_ms = triton.testing.do_bench(lambda: a @ b, warmup=50, rep=200)
    return {
        "copy_bytes_per_s": 2 * (1 << 30) / (copy_ms * 1e-3),
        "gemm_flops": 2 * 8192**3 / (gemm_ms * 1e-3),
        "device": torch.cuda.get_device_name(),
    }


def versions() -> dict[str, str | None]:
    """Versions of what ran, and the project's commit where git can tell."""
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for name in ("torch", "triton", "vllm", "transformers", "vllm-platform-template"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    # Not git's HEAD: the device machine receives the working tree over a clone of its
    # own, whose HEAD need not be this tree's (a run recorded e888d5b for 3068828's code).
    # The digest of the code that ran names it: compare with `source_digest()` here.
    out["source_digest"] = source_digest()
    return out


def source_digest() -> str:
    """sha256 of the plugin's and the benchmarks' Python files (paths and contents)."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(
        [*root.glob("vllm_platform_template/**/*.py"), *root.glob("benchmarks/*.py")]
    ):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def limit_ms(shape: str, batch: int, copy_rate: float) -> float:
    """Bytes a decode step must read (weights + KV of every request) over the copy rate."""
    context = PROMPT + (SHORT + LONG) / 2  # mean context over the measured steps
    nbytes = weight_bytes(shape, batch) + batch * context * kv_bytes_per_token(shape)
    return 1000 * nbytes / copy_rate


def core_sets(engines: list[str], cores: list[int]) -> dict[str, list[int]]:
    """Disjoint, equal sets of cores for the engines; the first core stays the harness's."""
    share = (len(cores) - 1) // len(engines)
    if share < 2:
        return {}
    return {e: cores[1 + i * share : 1 + (i + 1) * share] for i, e in enumerate(engines)}


def spec_for(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """One engine's spec: everything but the variant (and its cores) is the same for all."""
    return {
        "variant": ENGINE_VARIANTS.get(engine, engine),
        "cpus": args.cpus.get(engine),
        "shape": args.shape,
        "dtype": "bfloat16",
        "kv_cache_mib": args.kv_cache_mib,
        "max_num_seqs": max(args.batches),
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "max_model_len": PREFILL + 256,
        "worker_extension_cls": EXTENSION,
    }


def start(engines: list[str], args: argparse.Namespace) -> tuple[dict[str, EngineProbe], dict]:
    """Engines started side by side; returns the live ones and the failures."""
    probes = {e: EngineProbe(spec_for(e, args), wait=False) for e in engines}
    live, failed = {}, {}
    for e, probe in probes.items():
        try:
            probe.wait_init()
            live[e] = probe
            print(f"{e}: started in {probe.init['init_s']} s", file=sys.stderr)
        except RuntimeError as exc:
            failed[e] = str(exc)[-2000:]
            print(f"{e}: did not start:\n{failed[e]}", file=sys.stderr)
    return live, failed


def unit_figures(answer: dict[str, Any], batches: tuple[int, ...]) -> dict[str, float]:
    """A unit's metrics: the decode step per batch (ms) and the prefill rate (tokens/s)."""
    out = {
        f"step_ms_b{b}": 1000
        * (answer[f"b{b}"]["long_s"] - answer[f"b{b}"]["short_s"])
        / (LONG - SHORT)
        for b in batches
    }
    out["prefill_tok_s"] = PREFILL / answer["prefill_s"]
    return out


class Quads:
    """The quads of every comparison with stock, and every unit's record."""

    def __init__(
        self, probes: dict[str, EngineProbe], batches: tuple[int, ...], repeats: int
    ) -> None:
        self.probes, self.batches, self.repeats = probes, batches, repeats
        self.pairs = [e for e in probes if e != STOCK]  # each compared with stock
        self.units: list[dict[str, Any]] = []
        self.ratios: dict[str, dict[str, list[float]]] = {p: {} for p in self.pairs}

    def unit(self, engine: str, quad: int, pair: str, position: int) -> dict[str, float]:
        others = {e: p.pid for e, p in self.probes.items() if e != engine}
        with Window(engine, "unit", quad, others, settle_limit=IDLE_CPU_LIMIT) as window:
            answer = self.probes[engine].ask(
                op="unit", batches=list(self.batches), prompt=PROMPT, short=SHORT, long=LONG,
                prefill=PREFILL, long_first=position % 2 == 1, repeats=self.repeats, seed=quad,
            )  # fmt: skip
        figures = unit_figures(answer, self.batches)
        record = window.record | {"quad": quad, "pair": pair, "position": position}
        self.units.append(record | {"begin": answer["begin"], "end": answer["end"], **figures})
        return figures

    def quad(self, q: int, pair: str) -> None:
        order = ORDERS[q % 2]  # with schedule(): no quad starts with the engine that just ran
        figures = [
            self.unit(STOCK if who == "A" else pair, q, pair, i) for i, who in enumerate(order)
        ]
        for metric in figures[0]:
            ratio = quad_ratio(metric, order, [f[metric] for f in figures])
            self.ratios[pair].setdefault(metric, []).append(ratio)

    def engine_figures(self) -> dict[str, dict[str, Any]]:
        """Each engine's own figures over all its units: median and range per metric."""
        values: dict[str, dict[str, list[float]]] = {}
        for u in self.units:
            row = values.setdefault(u["engine"], {})
            for metric in (*(f"step_ms_b{b}" for b in self.batches), "prefill_tok_s"):
                row.setdefault(metric, []).append(u[metric])
        return {e: {m: median_range(v) for m, v in row.items()} for e, row in values.items()}


def gpu_figures(probes: dict[str, EngineProbe], batches: tuple[int, ...]) -> dict[str, Any]:
    """Each engine alone: span and kernel time of its decode step on the device, per batch."""
    out: dict[str, Any] = {}
    for engine, probe in probes.items():
        if engine == NULL:
            continue
        others = {e: p.pid for e, p in probes.items() if e != engine}
        out[engine] = {}
        for b in batches:
            with Window(engine, "gpu_step", 0, others, settle_limit=IDLE_CPU_LIMIT):
                answer = probe.ask(op="gpu_step", batch=b, prompt=PROMPT, short=SHORT, long=LONG)
            out[engine][f"b{b}"] = answer
    return out


def summary_of(
    result: dict[str, Any], quads: Quads, margin: float, copy_rate: float
) -> dict[str, Any]:
    """Comparisons (median, interval, verdict per metric), engines' figures, limits."""
    comparisons = {
        pair: {m: compare(ratios, margin) for m, ratios in metrics.items()}
        for pair, metrics in quads.ratios.items()
        if metrics
    }
    limits = {str(b): limit_ms(result["shape"], b, copy_rate) for b in quads.batches}
    engines = quads.engine_figures()
    fractions = {
        e: {str(b): limits[str(b)] / row[f"step_ms_b{b}"]["median"] for b in quads.batches}
        for e, row in engines.items()
    }
    return {"comparisons": comparisons, "engines": engines, "limit_ms": limits,
            "frac_of_limit": fractions}  # fmt: skip


def self_check(result: dict[str, Any]) -> list[str]:
    """Every reason the run must not be believed (empty: the self-check passed)."""
    problems = list(result["argument_differences"])
    problems += [f"{e}: did not start" for e in result["failed"]]
    problems += [result["error"]] if "error" in result else []
    if result.get("stock_backend_problem"):
        problems.append(result["stock_backend_problem"])
    null = result.get("summary", {}).get("comparisons", {}).get(NULL)
    if null is None:
        problems.append("the null test (stock' against stock) did not run: nothing is decided")
    else:
        problems += null_problems(null)
    busy = busy_units(result["units"])
    if len(busy) > BUSY_UNITS_LIMIT * max(len(result["units"]), 1):
        problems.append(
            f"{len(busy)} of {len(result['units'])} units had another engine busy "
            f"(limit {BUSY_UNITS_LIMIT:.0%}): {busy[:3]}"
        )
    if result["quads_run"] < result["quads"]:
        problems.append(f"{result['quads_run']} of {result['quads']} quads ran (time budget)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1.1b", choices=sorted(SHAPES))
    parser.add_argument("--candidates", default="gpu-template", help="engines compared with stock")
    parser.add_argument("--batches", help="decode batch sizes (default: by shape)")
    parser.add_argument("--quads", type=int, default=12, help="quads per comparison (even, 8+)")
    parser.add_argument(
        "--unit-repeats", type=int, default=3, help="generations of each kind in a unit"
    )
    parser.add_argument("--no-pin", action="store_true", help="engines share every core")
    parser.add_argument("--margin", type=float, default=0.05, help="the verdicts' margin")
    parser.add_argument(
        "--stock-backend", default="FLASH_ATTN", help="stock's default backend on this device"
    )
    parser.add_argument("--kv-cache-mib", type=int, default=4096)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    parser.add_argument("--budget-s", type=float, default=540, help="no quad starts past this")
    parser.add_argument("--no-gpu-pass", action="store_true", help="skip the device-side pass")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args(argv)
    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    unknown = sorted(set(candidates) - set(CANDIDATES))
    if unknown:
        parser.error(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    if args.quads < 8 or args.quads % 2:
        parser.error("the harness needs an even --quads of 8+ (ABBA and BAAB in pairs)")
    args.batches = tuple(
        int(b) for b in (args.batches.split(",") if args.batches else BATCHES[args.shape])
    )
    begin = time.perf_counter()

    def save(result: dict[str, Any]) -> None:
        result["wall_s"] = time.perf_counter() - begin
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, default=str))

    rates = device_rates()
    import torch

    torch.cuda.empty_cache()  # the engines check the free memory when they start
    engines = [STOCK, NULL, *candidates]
    args.cpus = {} if args.no_pin else core_sets(engines, sorted(os.sched_getaffinity(0)))
    result: dict[str, Any] = {
        "shape": args.shape,
        "batches": list(args.batches),
        "prompt": PROMPT,
        "short": SHORT,
        "long": LONG,
        "prefill": PREFILL,
        "quads": args.quads,
        "quads_run": 0,
        "margin": args.margin,
        "unit_repeats": args.unit_repeats,
        "cpus": args.cpus,
        "argv": sys.argv if argv is None else ["gpu_e2e.py", *argv],
        "rates": rates,
        "machine": machine(),
        "versions": versions(),
    }
    probes, result["failed"] = start(engines, args)
    result["engines"] = {
        e: {k: p.init.get(k) for k in ("init_s", "kwargs", "env", "env_changed", "resolved")}
        for e, p in probes.items()
    }
    result["argument_differences"] = argument_differences(result["engines"])
    if STOCK in probes:
        resolved = probes[STOCK].init.get("resolved")
        result["stock_backend_problem"] = backend_problem(resolved, args.stock_backend)
    quads = Quads(probes, args.batches, args.unit_repeats)
    if any(p.startswith("kwargs") for p in result["argument_differences"]):
        print("engine arguments differ: nothing measured", file=sys.stderr)
        print("\n".join(result["argument_differences"]), file=sys.stderr)
    elif STOCK in probes:
        try:
            warm = {"batches": list(args.batches), "prompt": PROMPT, "short": SHORT,
                    "long": LONG, "prefill": PREFILL}  # fmt: skip
            for probe in probes.values():
                probe.ask(op="warm", **warm)
            for q in range(0, args.quads, 2):
                if time.perf_counter() - begin > args.budget_s:
                    print(f"time budget spent after {q} quads", file=sys.stderr)
                    break
                # Per comparison an ABBA quad, then a BAAB one: every quad's first unit
                # follows another engine, so each engine has one unit right after its own
                # (a few per cent faster: seen on the H100) in every quad, never two.
                for pair in quads.pairs:
                    quads.quad(q, pair)
                    quads.quad(q + 1, pair)
                result["quads_run"] = q + 2
                print(f"quads {q + 2}/{args.quads} ({time.perf_counter() - begin:.0f} s)")
            if not args.no_gpu_pass:
                result["gpu"] = gpu_figures(probes, args.batches)
        except RuntimeError as exc:  # an engine died: keep what was measured, say so
            result["error"] = f"measuring stopped: {str(exc)[-2000:]}"
            print(result["error"], file=sys.stderr)
    result["units"] = quads.units
    for p in probes.values():
        p.quit()  # all shut down together
    for p in probes.values():
        p.close()
    if result["quads_run"] >= 2:
        result["summary"] = summary_of(result, quads, args.margin, rates["copy_bytes_per_s"])
        stock_ran = not result.get("stock_backend_problem")
        result["goals"] = {
            c: goals(
                args.shape,
                result["summary"]["comparisons"].get(c, {}),
                {int(b): f for b, f in result["summary"]["frac_of_limit"].get(c, {}).items()},
                stock_ran,
            )
            for c in candidates
            if c.startswith("gpu-template")
        }
    problems = self_check(result)
    result["self_check"] = {"passed": not problems, "problems": problems}
    save(result)
    if "summary" in result:
        print_summary(result)
        if args.chart:
            chart(result, args.chart)
        for candidate, rows in result.get("goals", {}).items():
            for g in rows:
                print(f"goal ({candidate}): {g['goal']}: {g['status']}")
    if problems:
        print("\nSELF-CHECK FAILED: these are not facts about the engines:", file=sys.stderr)
        print("\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 1
    print("\nself-check passed: the null test's intervals contain 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())

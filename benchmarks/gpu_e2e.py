"""vLLM end to end on a CUDA GPU: the template beside stock vLLM, a verdict per metric.

    python benchmarks/gpu_e2e.py --shape 1.1b --json out.json --chart out.png

Engines (``_engine_probe.py`` variants, one process each, ``bench_shapes.py``'s shape
with vLLM's dummy weights, bf16): ``stock`` (vLLM's ``CudaPlatform``, its default
attention backend: FlashAttention 3 on Hopper), ``stock'`` (a second, identical stock
engine: the null test) and each candidate of ``--candidates`` (default
``gpu-template``, the platform's default FULL_AND_PIECEWISE). Stock needs vLLM's
compiled files (``tools/gpu_tier.sh bench-e2e`` installs them). Every engine gets the
same arguments and environment but for the differences ``_e2e_checks.ALLOWED_ARGUMENTS``
and ``ALLOWED_ENV`` name, each with its reason; the report lists every difference with
its reason, the run stops before measuring if an argument differs without one, and
fails if the environment does (or if stock and stock' differ at all).

**Positions** (``_e2e_design.py``, seeded by ``--seed``, drawn afresh and recorded when
not given): the engines start side by side in a random order, each compiling on an
equal set of cores of its own; from then on every unit runs on the same measurement
cores, whichever engine it measures (its threads are moved there before the unit, the
other engines' onto the parking cores; ``--no-pin``: all share every core).

**Quads.** Each comparison with stock (the null test and every candidate) is
``--quads`` quads (8; a fixed number, decided before any figure is seen: no stopping
when it looks good, nothing trimmed or replaced), in pairs ABBA+BAAB or BAAB+ABBA (A:
stock, B: the other), one pair per comparison per round, the comparisons' order and the
pairs' orientation random under one rule: no quad starts with the engine that just ran.
So in every quad each engine has exactly one unit that follows its own (on the H100
such a unit ran about 3 % faster) and in a pair each engine holds each position once.
A unit is one short job: per batch ``--unit-repeats`` (2) ``SHORT``- and ``LONG``-token
generations each after a ``PROMPT``-token prompt (alternating, which goes first
alternates unit by unit), then as many ``PREFILL``-token prefills; the fastest of each
kind counts (the host's jitter only adds time; single generations spread by 17 % on
the H100). Its figures: the decode step time per batch,
``(t_long - t_short) / (LONG - SHORT)``, and the prefill rate. Before a unit the other
engines are waited on until they use no CPU, and their CPU time across the unit is
recorded (``_gpu_idle.Window``); every unit keeps its wall-clock start and end, its
cores and its place in the plan. Per quad and metric the ratio is the geometric mean
of B's two units over A's, per pair the geometric mean of its two quads'; over the
pairs, their geometric mean and a Student-t 95 % interval of it, and a verdict at
``--margin``: faster / same / slower, or undecided (``_e2e_stats.py``). The interval's
coverage is measured, by simulated null runs at this run's number of pairs, and printed.

**The self-check is the null test**: stock'/stock's interval must contain 1 for every
metric (the metrics as one family, Bonferroni: ``_e2e_checks.null_problems``), and its
95 % width is the harness's resolution on this machine, printed beside every verdict.
The run also fails when more than ``BUSY_UNITS_LIMIT`` of the units had another engine
busy, when an engine could not be moved onto its cores, when an engine did not start,
when fewer quads or device rounds ran than asked, or when stock's default engine ran
another backend than ``--stock-backend`` (vLLM falls back to Triton silently when
FlashAttention's compiled file does not load).

**On the device**, after the quads, ``--gpu-rounds`` (3) rounds in which stock and each
candidate in turn (a seeded order rotated each round; others idle) measure, per batch,
the span of a decode step on the GPU's clock (CUDA events at the start and the end of
the runner's step, in the worker extension all engines share: kernels and the gaps
between them) and, in a separate pass under the torch profiler, the kernel time per
step (a long generation's kernel sum minus a short one's, over the steps between): per
engine their median and range over the rounds, per candidate its ratio to stock's of
the same round, median and range. They tell kernel quality; the host step time of the
quads tells what a user waits for. The bandwidth limit of a step is the bytes it must
read (weights, then each request's KV cache) over the device's copy rate
(``dst.copy_(src)`` of 1 GiB, read + write) measured in this run; an 8192^3 bf16 matmul
gives the GEMM rate beside it.

**Time.** ``--deadline-s`` is the time from the benchmark's start (``main``) by which
everything must be printed (``tools/gpu_tier.sh`` passes what is left of its device call). A round
starts only if the longest round so far, the device pass's reserve and the closing
reserve still fit; a device round only if the longest device round so far and the
closing reserve do. What does not fit does not run, and the self-check says so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import EngineProbe, machine
from _e2e_checks import (
    BUSY_UNITS_LIMIT,
    IDLE_CPU_LIMIT,
    backend_problem,
    busy_units,
    difference_problems,
    differences,
    goals,
    null_problems,
)
from _e2e_design import (
    CoreLayout,
    PlannedQuad,
    core_layout,
    device_order,
    round_plan,
    start_order,
)
from _e2e_report import chart, print_summary
from _e2e_stats import (
    compare,
    coverage_table,
    median_range,
    quad_ratio,
    range_coverage,
)
from _gpu_idle import Window, pin_tree
from bench_shapes import SHAPES, kv_bytes_per_token, weight_bytes

STOCK, NULL = "stock", "stock'"
ENGINE_VARIANTS = {STOCK: "gpu-stock", NULL: "gpu-stock"}
CANDIDATES = ("gpu-template", "gpu-template-fused", "gpu-stock-triton", "gpu-stock-spawn")
BATCHES = {"1.1b": (1, 8, 64), "8b": (1, 32), "8b-w8a8": (1, 32), "mixtral-8l": (1, 32)}
PROMPT, SHORT, LONG = 128, 16, 144
PREFILL = 2048
EXTENSION = "_bench_worker.BenchWorkerExtension"
# 4 pairs: with the 2-generation units, 64 units fit one 10-minute device call beside the
# engines' start, the device rounds and the shutdown (docs/performance.md, "Time").
DEFAULT_QUADS = 8
# Seconds kept for the end: engines shut down together (about 11-15 s), the coverage
# simulation (a few seconds), the summary, the chart and the JSON.
CLOSE_RESERVE_S = 30.0
# Seconds reserved for one device measurement (one engine, one batch) before the device
# pass has run one: its three generations of at most LONG tokens and the profiler's work.
DEVICE_OP_RESERVE_S = 5.0


class Deadline:
    """Seconds left until ``seconds`` after it was made (at the benchmark's start)."""

    def __init__(self, seconds: float, clock: Any = time.monotonic) -> None:
        self.started, self.clock = clock(), clock
        self.end = self.started + seconds

    def elapsed(self) -> float:
        return float(self.clock() - self.started)

    def left(self) -> float:
        return float(self.end - self.clock())


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


def spec_for(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """One engine's spec: everything but the variant (and its cores) is the same for all."""
    layout: CoreLayout | None = args.layout
    return {
        "variant": ENGINE_VARIANTS.get(engine, engine),
        "cpus": layout.start[engine] if layout else None,
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
    """Engines started side by side in the order given; returns the live ones (in that
    order) and the failures."""
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
    """The engines' measurements: the quads of every comparison with stock, every unit's
    record, the device rounds; each engine placed on its cores before it runs."""

    def __init__(
        self,
        probes: dict[str, EngineProbe],
        batches: tuple[int, ...],
        repeats: int,
        layout: CoreLayout | None,
        seed: int,
    ) -> None:
        self.probes, self.batches, self.repeats, self.layout = probes, batches, repeats, layout
        # sorted: the seed gives the same plan whatever order the engines started in
        self.comparisons = sorted(e for e in probes if e != STOCK)
        self.units: list[dict[str, Any]] = []
        self.ratios: dict[str, dict[str, list[float]]] = {c: {} for c in self.comparisons}
        self.rng = random.Random(seed)
        self.last: str | None = None  # the engine that ran last
        self.rounds_run = 0
        self.device: list[dict[str, Any]] = []

    def place(self, engine: str) -> dict[str, Any]:
        """``engine`` onto the measurement cores, every other engine onto the parking ones."""
        if self.layout is None:
            return {}
        unpinned = []
        for name, probe in self.probes.items():
            cores = self.layout.measure if name == engine else self.layout.park
            unpinned += [f"{name} {u}" for u in pin_tree(probe.pid, cores)["unpinned"]]
        return {"cores": self.layout.measure, "unpinned": unpinned}

    def _others(self, engine: str) -> dict[str, int]:
        return {e: p.pid for e, p in self.probes.items() if e != engine}

    def warm(self) -> None:
        """Every shape a unit runs, once per engine, unmeasured, each on the measurement cores."""
        warm = {"batches": list(self.batches), "prompt": PROMPT, "short": SHORT,
                "long": LONG, "prefill": PREFILL}  # fmt: skip
        for engine, probe in self.probes.items():
            self.place(engine)
            probe.ask(op="warm", **warm)
            self.last = engine

    def unit(self, engine: str, quad: PlannedQuad, position: int) -> dict[str, float]:
        placed = self.place(engine)
        with Window(
            engine, "unit", quad.index, self._others(engine), settle_limit=IDLE_CPU_LIMIT
        ) as window:
            answer = self.probes[engine].ask(
                op="unit", batches=list(self.batches), prompt=PROMPT, short=SHORT, long=LONG,
                prefill=PREFILL, long_first=position % 2 == 1, repeats=self.repeats,
                seed=quad.index,
            )  # fmt: skip
        self.last = engine
        figures = unit_figures(answer, self.batches)
        record = window.record | placed | {"round": self.rounds_run, "quad": quad.index,
            "comparison": quad.comparison, "order": quad.order, "position": position}  # fmt: skip
        self.units.append(record | {"begin": answer["begin"], "end": answer["end"], **figures})
        return figures

    def quad(self, planned: PlannedQuad) -> None:
        engines = planned.engines(STOCK)
        figures = [self.unit(e, planned, i) for i, e in enumerate(engines)]
        for metric in figures[0]:
            ratio = quad_ratio(metric, planned.order, [f[metric] for f in figures])
            self.ratios[planned.comparison].setdefault(metric, []).append(ratio)

    def round(self) -> None:
        """One pair of quads per comparison (``_e2e_design.round_plan``)."""
        for planned in round_plan(self.comparisons, self.rounds_run, self.last, STOCK, self.rng):
            self.quad(planned)
        self.rounds_run += 1

    def device_round(self, order: Sequence[str], round_: int) -> None:
        """Each engine of ``order`` in turn: span and kernel time of its decode step per batch."""
        for engine in order:
            placed = self.place(engine)
            for b in self.batches:
                with Window(
                    engine, "gpu_step", round_, self._others(engine), settle_limit=IDLE_CPU_LIMIT
                ) as window:
                    answer = self.probes[engine].ask(
                        op="gpu_step", batch=b, prompt=PROMPT, short=SHORT, long=LONG, warm=False
                    )
                self.device.append(window.record | placed | {"batch": b} | answer)
            self.last = engine

    def engine_figures(self) -> dict[str, dict[str, Any]]:
        """Each engine's own figures over all its units: median and range per metric."""
        values: dict[str, dict[str, list[float]]] = {}
        for u in self.units:
            row = values.setdefault(u["engine"], {})
            for metric in (*(f"step_ms_b{b}" for b in self.batches), "prefill_tok_s"):
                row.setdefault(metric, []).append(u[metric])
        return {e: {m: median_range(v) for m, v in row.items()} for e, row in values.items()}


DEVICE_KEYS = ("span_ms_per_step", "kernel_ms_per_step")


def device_summary(records: Sequence[dict[str, Any]], stock: str = STOCK) -> dict[str, Any]:
    """The device rounds: per engine and batch, each figure's median and range over the
    rounds; per other engine, its ratio to stock's figure of the same round and batch."""
    figures: dict[str, dict[str, dict[str, list[float]]]] = {}
    by_round: dict[tuple[str, int, int], dict[str, Any]] = {}
    for r in records:
        by_round[(r["engine"], r["round"], r["batch"])] = r
        row = figures.setdefault(r["engine"], {}).setdefault(f"b{r['batch']}", {})
        for key in DEVICE_KEYS:
            if r.get(key) is not None:
                row.setdefault(key, []).append(r[key])
    ratios: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (engine, round_, batch), r in by_round.items():
        base = by_round.get((stock, round_, batch))
        if engine == stock or base is None:
            continue
        row = ratios.setdefault(engine, {}).setdefault(f"b{batch}", {})
        for key in DEVICE_KEYS:
            if r.get(key) is not None and base.get(key):
                row.setdefault(key, []).append(r[key] / base[key])

    def summarise(table: dict[str, dict[str, dict[str, list[float]]]]) -> dict[str, Any]:
        return {e: {b: {k: median_range(v) for k, v in row.items() if v}
                    for b, row in rows.items()} for e, rows in table.items()}  # fmt: skip

    rounds = len({r["round"] for r in records})
    return {"engines": summarise(figures), "ratios": summarise(ratios), "rounds": rounds,
            "range_coverage": range_coverage(rounds) if rounds else None}  # fmt: skip


def summary_of(
    result: dict[str, Any], quads: Quads, margin: float, copy_rate: float
) -> dict[str, Any]:
    """Comparisons (ratio, interval, verdict per metric), engines' figures, limits."""
    comparisons = {
        name: {m: compare(ratios, margin) for m, ratios in metrics.items()}
        for name, metrics in quads.ratios.items()
        if metrics and min(len(r) for r in metrics.values()) >= 4  # two pairs at least
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
    problems = difference_problems(result["differences"])
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
    unpinned = [u for u in [*result["units"], *result.get("gpu", {}).get("records", [])]
                if u.get("unpinned")]  # fmt: skip
    if unpinned:
        problems.append(
            f"{len(unpinned)} measurements with threads not on their cores: "
            f"{unpinned[0]['unpinned'][:3]}"
        )
    if result["quads_run"] < result["quads"]:
        problems.append(f"{result['quads_run']} of {result['quads']} quads ran (time)")
    gpu = result.get("gpu")
    if gpu is not None and gpu["rounds_run"] < gpu["rounds"]:
        problems.append(f"{gpu['rounds_run']} of {gpu['rounds']} device rounds ran (time)")
    return problems


def measure(quads: Quads, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """The quads' rounds, then the device rounds, each only while it fits the deadline."""
    quads.warm()
    device_engines = [e for e in quads.probes if e != NULL]
    device_ops = 0 if args.no_gpu_pass else args.gpu_rounds * len(device_engines)
    reserve = device_ops * len(args.batches) * DEVICE_OP_RESERVE_S + CLOSE_RESERVE_S
    longest = 0.0
    for _ in range(args.quads // 2):
        if args.deadline.left() < longest + reserve:
            print(f"deadline: {quads.rounds_run} of {args.quads // 2} rounds ran", file=sys.stderr)
            break
        began = time.monotonic()
        quads.round()
        longest = max(longest, time.monotonic() - began)
        result["quads_run"] = 2 * quads.rounds_run
        print(f"quads {2 * quads.rounds_run}/{args.quads} per comparison "
              f"({args.deadline.elapsed():.0f} s)")  # fmt: skip
    if args.no_gpu_pass:
        return
    result["gpu"] = {"rounds": args.gpu_rounds, "rounds_run": 0, "records": quads.device}
    longest = len(device_engines) * len(args.batches) * DEVICE_OP_RESERVE_S
    for r in range(args.gpu_rounds):
        if args.deadline.left() < longest + CLOSE_RESERVE_S:
            print(f"deadline: {r} of {args.gpu_rounds} device rounds ran", file=sys.stderr)
            break
        began = time.monotonic()
        quads.device_round(device_order(device_engines, r, args.seed), r)
        longest = max(longest, time.monotonic() - began)
        result["gpu"]["rounds_run"] = r + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1.1b", choices=sorted(SHAPES))
    parser.add_argument("--candidates", default="gpu-template", help="engines compared with stock")
    parser.add_argument("--batches", help="decode batch sizes (default: by shape)")
    parser.add_argument(
        "--quads", type=int, default=DEFAULT_QUADS, help="quads per comparison (even, 8+)"
    )
    parser.add_argument(
        "--unit-repeats", type=int, default=2, help="generations of each kind in a unit"
    )
    parser.add_argument("--gpu-rounds", type=int, default=3, help="rounds of the device pass")
    parser.add_argument("--seed", type=int, help="the plan's seed (default: drawn, recorded)")
    parser.add_argument("--no-pin", action="store_true", help="engines share every core")
    parser.add_argument("--margin", type=float, default=0.05, help="the verdicts' margin")
    parser.add_argument(
        "--stock-backend", default="FLASH_ATTN", help="stock's default backend on this device"
    )
    parser.add_argument("--kv-cache-mib", type=int, default=4096)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    parser.add_argument(
        "--deadline-s", type=float, default=540,
        help="seconds from this process's start by which everything is printed",
    )  # fmt: skip
    parser.add_argument("--no-gpu-pass", action="store_true", help="skip the device-side pass")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args(argv)
    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    unknown = sorted(set(candidates) - set(CANDIDATES))
    if unknown:
        parser.error(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    if args.quads < 8 or args.quads % 2:
        parser.error("the harness needs an even --quads of 8+ (pairs of ABBA and BAAB)")
    if args.gpu_rounds < 1:
        parser.error("--gpu-rounds must be 1 or more (or --no-gpu-pass)")
    args.batches = tuple(
        int(b) for b in (args.batches.split(",") if args.batches else BATCHES[args.shape])
    )
    args.seed = secrets.randbelow(2**31) if args.seed is None else args.seed
    args.deadline = Deadline(args.deadline_s)
    rng = random.Random(args.seed)

    rates = device_rates()
    import torch

    torch.cuda.empty_cache()  # the engines check the free memory when they start
    engines = start_order([STOCK, NULL, *candidates], rng)
    args.layout = None if args.no_pin else core_layout(engines, available_cores(), rng)
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
        "seed": args.seed,
        "start_order": engines,
        "cores": args.layout.as_dict() if args.layout else None,
        "deadline_s": args.deadline_s,
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
    result["differences"] = differences(result["engines"])
    if STOCK in probes:
        resolved = probes[STOCK].init.get("resolved")
        result["stock_backend_problem"] = backend_problem(resolved, args.stock_backend)
    quads = Quads(probes, args.batches, args.unit_repeats, args.layout, args.seed)
    refused = [p for p in difference_problems(result["differences"]) if p.startswith("kwargs")]
    if refused:
        print("engine arguments differ: nothing measured", file=sys.stderr)
        print("\n".join(refused), file=sys.stderr)
    elif STOCK in probes:
        try:
            measure(quads, args, result)
        except RuntimeError as exc:  # an engine died: keep what was measured, say so
            result["error"] = f"measuring stopped: {str(exc)[-2000:]}"
            print(result["error"], file=sys.stderr)
    result["units"] = quads.units
    for p in probes.values():
        p.quit()  # all shut down together
    for p in probes.values():
        p.close()
    finish(result, quads, args, candidates)
    problems = self_check(result)
    result["self_check"] = {"passed": not problems, "problems": problems}
    result["wall_s"] = args.deadline.elapsed()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
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


def available_cores() -> list[int]:
    """The cores this process may run on (the engines' layout is made of them)."""
    return sorted(os.sched_getaffinity(0))


def finish(
    result: dict[str, Any], quads: Quads, args: argparse.Namespace, candidates: list[str]
) -> None:
    """The summary, the device rounds' summary, the measured coverage and the goals."""
    if "gpu" in result:
        result["gpu"]["summary"] = device_summary(result["gpu"]["records"])
    summary = summary_of(result, quads, args.margin, result["rates"]["copy_bytes_per_s"])
    if not summary["comparisons"]:
        return
    result["summary"] = summary
    pairs = min(len(row["pairs"]) for rows in summary["comparisons"].values()
                for row in rows.values())  # fmt: skip
    result["coverage"] = coverage_table(pairs, metrics=len(args.batches) + 1)
    stock_ran = not result.get("stock_backend_problem")
    result["goals"] = {
        c: goals(
            args.shape,
            summary["comparisons"].get(c, {}),
            {int(b): f for b, f in summary["frac_of_limit"].get(c, {}).items()},
            stock_ran,
        )
        for c in candidates
        if c.startswith("gpu-template")
    }


if __name__ == "__main__":
    sys.exit(main())

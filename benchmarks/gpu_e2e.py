"""vLLM end to end on a CUDA GPU: the template platform beside stock vLLM, each engine alone.

    python benchmarks/gpu_e2e.py --shape 1.1b --json out.json --chart out.png

Engines (``_engine_probe.py`` variants, one process each, ``bench_shapes.py``'s
shape with vLLM's dummy weights, bf16): ``gpu-stock`` (vLLM's ``CudaPlatform``
with its default attention backend: FlashAttention 3 on Hopper), ``gpu-stock-triton``
(the same with ``TRITON_ATTN``), ``gpu-template`` (the platform's default,
FULL_AND_PIECEWISE) and ``gpu-template-fused`` (the hand-fused model). Stock
needs vLLM's two compiled files (``tools/gpu_tier.sh bench-e2e`` installs them).
Every engine gets the same arguments but for the platform and its backend
(dtype, scheduler limits and KV cache set explicitly, never left to a
platform's default); the run stops before measuring if the arguments differ,
and fails its self-check if the environment they were started with does
(``_e2e_checks.argument_differences``; what building each engine changed in its
environment is recorded beside).

**Each engine alone, proven.** All engines start side by side once (they
compile together, cold) and stay alive; then each round visits every engine in
turn (who goes first rotates), measuring one engine while the others wait idle.
Restarting every engine for every round would be the other way to have it
alone, but a warm start of the 1.1B shape takes 11-43 s on the lent H100: 4
engines x 5 rounds of restarts do not fit the one 10-minute device call that
the whole run must fit, starts included. Idle is proven, not assumed: before
each engine's measurement a ``_gpu_idle.Window`` waits until the others use no
CPU (an engine keeps a core busy for about a second after its last request),
then records across the measurement the CPU time every
other engine's process tree used (more than ``IDLE_CPU_LIMIT`` of the window:
that measurement is taken again, and the run fails if it stays so) and NVML's
utilisation samples of the window.

Per engine and round: the decode step time at each batch, ``(t(208 tokens) -
t(16 tokens)) / 192`` after a 128-token prompt, each ``t`` the fastest of five
generations (batch 1 is host-bound; the host's jitter only adds time), the time to
first token, and the prefill rate of a 2048-token prompt (the fastest of three).
Ratios are per round (engine over stock's time, both measured in the same round),
then the median and min-max
range over rounds (``_e2e_stats.py``), in the JSON, the table and as error bars
on the chart (``_e2e_report.py``). The bandwidth limit of a decode step is the
bytes it must read (weights, then each request's KV cache) over the device's
copy rate (``dst.copy_(src)`` of 1 GiB, bytes read + written) measured in this
run; an 8192^3 bf16 matmul gives the GEMM rate beside it.

**Self-check (``_e2e_checks.py``), exit status 1 with the reasons when it fails:**
after the rounds every engine is closed and stock (default backend) is measured
the plain way: a fresh process, one engine, nothing else alive, median of
``--plain`` (at least 3) measurements; the harness's stock figures must be
within 10 % of it. Any engine whose rounds spread more than 25 % has the round
farthest from its median measured again (all engines, so ratios stay paired;
at most ``--max-repeats`` times, the replaced figures kept in the JSON), and
fails the run if it still spreads. A goal of the issue counts as unmet when
stock's default-backend engine did not run, or ran another backend than
``--stock-backend`` (vLLM falls back to Triton silently when FlashAttention's
compiled file does not load).

**Facts for reading the numbers.** Each engine's worker reports the
configuration it resolved (``_bench_worker.py``: dtype, KV-cache dtype,
scheduler limits, chunked prefill, compile ranges, graph mode, attention backend
per layer, model runner), and after the rounds one 2048-token prefill per engine
runs with the worker recording every engine step it took (tokens per step) and
a torch-profiler trace (GPU time, top kernels). ``--profile`` adds separate
in-process profiler runs of 16 decode steps (extra engine starts);
``--transformers`` times Hugging Face transformers' eager decode at batch 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import EngineProbe, machine
from _e2e_checks import (
    IDLE_CPU_LIMIT,
    SPREAD_LIMIT,
    argument_differences,
    backend_problem,
    baseline_differences,
    goals,
    idle_failures,
    spread_failures,
)
from _e2e_report import chart, print_summary
from _e2e_stats import ratio_summary, summarise, widest
from _gpu_idle import Window
from bench_shapes import SHAPES, kv_bytes_per_token, weight_bytes

STOCK, STOCK_TRITON = "gpu-stock", "gpu-stock-triton"
VARIANTS = (STOCK, STOCK_TRITON, "gpu-template", "gpu-template-fused")
BATCHES = {"1.1b": (1, 8, 64), "8b": (1, 32), "8b-w8a8": (1, 32), "mixtral-8l": (1, 32)}
PROMPT, SHORT, LONG = 128, 16, 208
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


def spec_for(variant: str, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """One engine's spec: everything but the variant is the same for every engine."""
    return {
        "variant": variant,
        "shape": args.shape,
        "dtype": "bfloat16",
        "kv_cache_mib": args.kv_cache_mib,
        "max_num_seqs": max(args.batches),
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "max_model_len": PREFILL + 256,
        "worker_extension_cls": EXTENSION,
        **extra,
    }


def start(
    variants: list[str], args: argparse.Namespace, caches: dict[str, str]
) -> tuple[dict[str, EngineProbe], dict[str, str]]:
    """Engines started side by side; returns the live ones and the failures."""
    probes = {v: EngineProbe(spec_for(v, args), caches.get(v), wait=False) for v in variants}
    live, failed = {}, {}
    for v, probe in probes.items():
        try:
            probe.wait_init()
            live[v] = probe
            print(f"{v}: started in {probe.init['init_s']} s", file=sys.stderr)
        except RuntimeError as exc:
            failed[v] = str(exc)[-2000:]
            print(f"{v}: did not start:\n{failed[v]}", file=sys.stderr)
    return live, failed


def measure_engine(probe: EngineProbe, batches: tuple[int, ...], seed: int) -> dict[str, float]:
    """One engine's figures of one round: step and TTFT per batch, the prefill rate."""
    out: dict[str, float] = {}
    for batch in batches:
        step = probe.ask(op="step", batch=batch, prompt=PROMPT, short=SHORT, long=LONG, seed=seed)
        out[f"step_ms_b{batch}"] = step["step_ms"]
        out[f"ttft_ms_b{batch}"] = step["ttft_ms"]
    out["prefill_tok_s"] = probe.ask(op="prefill", length=PREFILL, seed=seed)["prefill_tok_s"]
    return out


class Rounds:
    """The measured rounds: ``runs[engine][metric][round]`` and each window's idle record."""

    def __init__(self, probes: dict[str, EngineProbe], batches: tuple[int, ...]) -> None:
        self.probes, self.batches = probes, batches
        self.runs: dict[str, dict[str, list[float]]] = {v: {} for v in probes}
        self.windows: list[dict[str, Any]] = []
        self.replaced: list[dict[str, Any]] = []

    def _alone(self, engine: str, round_: int, retries: int = 2) -> dict[str, float]:
        others = {v: p.pid for v, p in self.probes.items() if v != engine}
        for attempt in range(retries + 1):
            with Window(engine, "round", round_, others, settle_limit=IDLE_CPU_LIMIT) as window:
                figures = measure_engine(self.probes[engine], self.batches, seed=round_)
            window.record["attempt"] = attempt
            self.windows.append(window.record)
            if not idle_failures([window.record]):
                break
            print(f"{engine} round {round_}: another engine was busy; again", file=sys.stderr)
        return figures

    def round(self, r: int, replace: bool = False) -> None:
        order = list(self.probes)
        order = order[r % len(order) :] + order[: r % len(order)]  # who goes first rotates
        for engine in order:
            figures = self._alone(engine, r)
            if replace:  # keep what the repeat replaces
                old = {m: self.runs[engine][m][r] for m in figures}
                self.replaced.append({"engine": engine, "round": r, "figures": old})
            for metric, value in figures.items():
                values = self.runs[engine].setdefault(metric, [])
                if replace:
                    values[r] = value
                else:
                    values.append(value)

    def checked_metrics(self) -> list[str]:
        return [f"step_ms_b{b}" for b in self.batches] + ["prefill_tok_s"]


def measure_all(
    rounds: Rounds,
    probes: dict[str, EngineProbe],
    args: argparse.Namespace,
    left: Callable[[], float],
    result: dict[str, Any],
) -> None:
    """The rounds, bounded repeats of a round that spreads, then each engine's prefill facts."""
    for r in range(args.rounds):
        rounds.round(r)
        print(f"round {r + 1}/{args.rounds} done ({left():.0f} s of budget left)")
    result["repeats"] = 0
    while result["repeats"] < args.max_repeats and left() > 150:
        worst = widest(rounds.runs, rounds.checked_metrics(), SPREAD_LIMIT)
        if worst is None:
            break
        engine, metric, r, s = worst
        print(f"{engine} {metric} spreads {100 * s:.0f} %: round {r + 1} again")
        rounds.round(r, replace=True)
        result["repeats"] += 1
    if not args.no_diag and left() > 120:
        for v, p in probes.items():
            result["prefill_diag"][v] = p.ask(op="prefill_diag", length=PREFILL, profile=True)


def plain_stock(
    args: argparse.Namespace, cache: str | None, batches: tuple[int, ...]
) -> dict[str, Any]:
    """Stock, default backend, the plain way: a fresh process, nothing else alive."""
    probe = EngineProbe(spec_for(STOCK, args), cache)
    figures: dict[str, list[float]] = {}
    for i in range(args.plain):
        for metric, value in measure_engine(probe, batches, seed=100 + i).items():
            if not metric.startswith("ttft"):
                figures.setdefault(metric, []).append(value)
    probe.close()
    return {"init_s": probe.init["init_s"], "runs": figures} | {
        k: probe.init.get(k) for k in ("kwargs", "env", "resolved")
    }


def transformers_step_ms(shape: str, batch: int = 1) -> float:
    """Hugging Face transformers' eager decode step on the same shape (random bf16 weights)."""
    import torch
    from bench_shapes import shape_model_dir
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(shape_model_dir(shape))
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    ids = torch.randint(10, config.vocab_size, (batch, PROMPT), device="cuda")

    def run(tokens: int) -> float:
        torch.cuda.synchronize()
        begin = time.perf_counter()
        with torch.no_grad():
            model.generate(
                ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                pad_token_id=0,
            )  # fmt: skip
        torch.cuda.synchronize()
        return time.perf_counter() - begin

    run(SHORT)  # warm up
    step = 1000 * (run(LONG) - run(SHORT)) / (LONG - SHORT)
    model.cpu()  # give the device memory back
    torch.cuda.empty_cache()
    return step


def profile(
    variants: list[str], args: argparse.Namespace, caches: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """torch-profiler runs of 16 decode steps, each engine in this process (extra starts)."""
    results: dict[str, dict[str, Any]] = {}
    for v in variants:
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        try:
            probe = EngineProbe(spec_for(v, args, env=env), caches.get(v))
        except RuntimeError as exc:
            results[v] = {"error": str(exc)[-2000:]}
            continue
        results[v] = {
            f"b{b}": probe.ask(op="profile", batch=b, prompt=PROMPT, steps=16) for b in (1, 64)
        }
        probe.close()
    return results


def summary_of(result: dict[str, Any], rates: dict[str, Any]) -> dict[str, Any]:
    """Per engine: medians and ranges, ratios to both stocks, bandwidth limits."""
    runs, batches = result["runs"], result["batches"]
    stats = summarise(runs)
    vs = {STOCK: ratio_summary(runs, STOCK), STOCK_TRITON: ratio_summary(runs, STOCK_TRITON)}
    summary: dict[str, Any] = {}
    for engine, metrics in stats.items():
        limits = {str(b): limit_ms(result["shape"], b, rates["copy_bytes_per_s"]) for b in batches}
        summary[engine] = {
            "init_s": result["engines"][engine]["init_s"],
            "metrics": metrics,
            "vs_stock": vs[STOCK].get(engine, {}),
            "vs_stock_triton": vs[STOCK_TRITON].get(engine, {}),
            "limit_ms": limits,
            "frac_of_limit": {
                str(b): limits[str(b)] / metrics[f"step_ms_b{b}"]["median"] for b in batches
            },
        }
    return summary


def self_check(result: dict[str, Any], variants: list[str]) -> list[str]:
    """Every reason the run must not be believed (empty: the self-check passed)."""
    problems = list(result["argument_differences"])
    problems += [f"{v}: did not start" for v in result["failed"]]
    problems += [result["error"]] if "error" in result else []
    if result.get("stock_backend_problem"):
        problems.append(result["stock_backend_problem"])
    if STOCK not in result["runs"]:
        problems.append(
            f"{STOCK} (stock's default backend) did not run"
            + ("" if STOCK in variants else ": not among --variants")
            + "; no baseline, no goal can be met"
        )
    elif result.get("plain") is None:
        why = result.get("plain_error", "")
        problems.append(
            "stock alone (the plain way) was not measured" + (f": {why}" if why else "")
        )
    else:
        problems += baseline_differences(result["runs"][STOCK], result["plain"]["runs"])
        same = {"harness": result["engines"][STOCK], "plain": result["plain"]}
        problems += [f"stock alone: {p}" for p in argument_differences(same)]
    problems += spread_failures(result["runs"], result["checked_metrics"], SPREAD_LIMIT)
    problems += idle_failures(result["windows_used"])
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1.1b", choices=sorted(SHAPES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--batches", help="decode batch sizes (default: by shape)")
    parser.add_argument("--rounds", type=int, default=5, help="at least 5")
    parser.add_argument("--max-repeats", type=int, default=3, help="rounds measured again")
    parser.add_argument("--plain", type=int, default=3, help="stock-alone measurements (3+)")
    parser.add_argument(
        "--stock-backend", default="FLASH_ATTN", help="stock's default backend on this device"
    )
    parser.add_argument("--kv-cache-mib", type=int, default=4096)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    parser.add_argument("--budget-s", type=float, default=560, help="skip repeats past this")
    parser.add_argument("--no-diag", action="store_true", help="skip the prefill diagnosis")
    parser.add_argument("--profile", action="store_true", help="torch profiler runs, b1 and b64")
    parser.add_argument(
        "--transformers", action="store_true", help="also time transformers' eager decode, b1"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    if args.rounds < 5 or args.plain < 3:
        parser.error("the harness needs --rounds 5+ and --plain 3+ (medians with their range)")
    args.batches = tuple(
        int(b) for b in (args.batches.split(",") if args.batches else BATCHES[args.shape])
    )
    begin = time.perf_counter()

    def left() -> float:
        return args.budget_s - (time.perf_counter() - begin)

    def save(result: dict[str, Any]) -> None:
        result["wall_s"] = time.perf_counter() - begin
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, default=str))

    rates = device_rates()
    import torch

    torch.cuda.empty_cache()  # the engines check the free memory when they start
    result: dict[str, Any] = {
        "shape": args.shape,
        "batches": list(args.batches),
        "prefill": PREFILL,
        "rounds": args.rounds,
        "argv": sys.argv if argv is None else ["gpu_e2e.py", *argv],
        "rates": rates,
        "machine": machine(),
        "versions": versions(),
        "plain": None,
        "prefill_diag": {},
    }
    probes, failed = start(variants, args, {})
    result["failed"] = failed
    result["engines"] = {
        v: {k: p.init.get(k) for k in ("init_s", "kwargs", "env", "env_changed", "resolved")}
        for v, p in probes.items()
    }
    result["argument_differences"] = argument_differences(result["engines"])
    if STOCK in probes:
        resolved = probes[STOCK].init.get("resolved")
        result["stock_backend_problem"] = backend_problem(resolved, args.stock_backend)
    caches = {v: p.cache_root for v, p in probes.items()}
    rounds = Rounds(probes, args.batches)
    result["checked_metrics"] = rounds.checked_metrics()
    # Different engine arguments make the figures incomparable: stop before measuring. A
    # different environment is measured anyway (it may be the platform's own doing) and
    # fails the self-check at the end, named.
    if result["argument_differences"]:
        print("engines differ beyond the platform:", file=sys.stderr)
        print("\n".join(result["argument_differences"]), file=sys.stderr)
    if any(p.startswith("kwargs") for p in result["argument_differences"]):
        print("engine arguments differ: nothing measured", file=sys.stderr)
    else:
        try:
            measure_all(rounds, probes, args, left, result)
        except RuntimeError as exc:  # an engine died: keep what was measured, say so
            result["error"] = f"measuring stopped: {str(exc)[-2000:]}"
            print(result["error"], file=sys.stderr)
    result["runs"], result["replaced"] = rounds.runs, rounds.replaced
    result["windows"] = rounds.windows
    # the windows whose figures stand (a retried measurement's failed window is kept apart)
    result["windows_used"] = _last_windows(rounds.windows)
    for p in probes.values():
        p.quit()  # all shut down together
    for p in probes.values():
        p.close()
    save(result)
    if rounds.runs.get(STOCK):
        print("stock alone, the plain way (fresh process, nothing else alive)", file=sys.stderr)
        try:
            result["plain"] = plain_stock(args, caches.get(STOCK), args.batches)
        except RuntimeError as exc:
            result["plain_error"] = str(exc)[-2000:]
    if rounds.runs and all(rounds.runs.values()) and "error" not in result:
        result["summary"] = summary_of(result, rates)
        ratios = {e: row["vs_stock"] for e, row in result["summary"].items()}
        fractions = {
            e: {int(b): f for b, f in row["frac_of_limit"].items()}
            for e, row in result["summary"].items()
        }
        stock_ran = bool(rounds.runs.get(STOCK)) and not result.get("stock_backend_problem")
        result["goals"] = {
            t: goals(args.shape, ratios, fractions, STOCK, t, stock_ran)
            for t in result["summary"]
            if t.startswith("gpu-template")
        }
    if args.profile:
        result["profiles"] = profile(list(probes), args, caches)
    if args.transformers:
        result["transformers_step_ms_b1"] = transformers_step_ms(args.shape)
    problems = self_check(result, variants)
    result["self_check"] = {"passed": not problems, "problems": problems}
    save(result)
    if "summary" in result:
        print_summary(result)
        if args.chart:
            chart(result, args.chart)
        for rows in result.get("goals", {}).values():
            for g in rows:
                print(f"goal: {g['goal']}: {g['status']}")
    if problems:
        print("\nSELF-CHECK FAILED: these are not facts about the engines:", file=sys.stderr)
        print("\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 1
    print("\nself-check passed: stock in the harness matches stock alone; rounds within 25 %")
    return 0


def _last_windows(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last attempt of each (engine, round) measurement: the one whose figures stand."""
    last: dict[tuple[str, int], dict[str, Any]] = {}
    for w in windows:
        last[(w["engine"], w["round"])] = w
    return list(last.values())


if __name__ == "__main__":
    sys.exit(main())

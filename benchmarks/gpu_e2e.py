"""vLLM end to end on a CUDA GPU: the template platform in each graph mode beside stock vLLM.

    python benchmarks/gpu_e2e.py --shape 1.1b --json out.json --chart out.png [--profile]

Each engine is an ``_engine_probe.py`` process (``bench_shapes.py``: the model's
shape with vLLM's dummy weights, bf16), all started side by side and kept alive;
rounds then interleave the engines request by request, so drifts of the machine
hit every engine alike. Per engine and batch size (1, 8, 64): the decode step
time, ``(t(144 tokens) - t(16 tokens)) / 128`` after a 128-token prompt, and the
time to first token; the prefill rate of one 2048-token prompt; the cold init
(first start, fresh compile cache, engines starting together) and, with
``--warm-init``, a second start on the same cache. The bandwidth limit of a
decode step is the bytes it must read (weights, then each request's KV cache)
over the device's copy rate (``dst.copy_(src)`` of 1 GiB, bytes read + written),
measured in this run; an 8192^3 bf16 matmul gives the GEMM rate beside it.
Ratios are the median over rounds of each round's template / stock ratio.

Engines: ``gpu-stock`` (vLLM's ``CudaPlatform``, its Triton attention, its
default FULL_AND_PIECEWISE; needs vLLM's compiled files: staging in
``tools/gpu_tier.sh bench-e2e``), ``gpu-template`` (the platform's default:
FULL_AND_PIECEWISE), ``gpu-template-piecewise`` and ``gpu-template-fused`` (the
hand-fused model, no torch.compile: FULL_DECODE_ONLY). An engine that fails to
start is reported and left out. ``--profile`` adds torch-profiler runs (engine
in this process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) of 16 decode steps at
batch 1 and 64: per-step wall and GPU kernel time, launches, top kernels.
``--transformers`` times Hugging Face transformers' eager greedy decode at batch 1
on the same shape (random bf16 weights) for the ratio against it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import EngineProbe
from bench_shapes import SHAPES, kv_bytes_per_token, weight_bytes

VARIANTS = ("gpu-stock", "gpu-template", "gpu-template-piecewise", "gpu-template-fused")
BATCHES = (1, 8, 64)
PROMPT, SHORT, LONG = 128, 16, 144
PREFILL = 2048


def device_rates() -> dict[str, float]:
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


def limit_ms(shape: str, batch: int, copy_rate: float) -> float:
    """Bytes a decode step must read (weights + KV of every request) over the copy rate."""
    context = PROMPT + (SHORT + LONG) / 2  # mean context over the measured steps
    nbytes = weight_bytes(shape) + batch * context * kv_bytes_per_token(shape)
    return 1000 * nbytes / copy_rate


def spec_for(variant: str, shape: str, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    return {
        "variant": variant,
        "shape": shape,
        "kv_cache_mib": args.kv_cache_mib,
        "max_num_seqs": max(BATCHES),
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "max_model_len": PREFILL + 256,
        **extra,
    }


def start(variants: list[str], shape: str, args: argparse.Namespace, caches: dict[str, str]):
    """Engines started side by side; returns the live ones and the failures."""
    probes = {}
    for v in variants:
        probes[v] = EngineProbe(spec_for(v, shape, args), caches.get(v), wait=False)
    live, failed = {}, {}
    for v, probe in probes.items():
        try:
            probe.wait_init()
            live[v] = probe
        except RuntimeError as exc:
            failed[v] = str(exc)[-2000:]
            print(f"{v}: did not start:\n{failed[v]}", file=sys.stderr)
    return live, failed


def measure(probes: dict[str, EngineProbe], rounds: int) -> dict[str, Any]:
    runs: dict[str, dict[str, list[float]]] = {v: {} for v in probes}
    order = list(probes)
    for r in range(rounds):
        order = order[1:] + order[:1]  # who goes first rotates
        for batch in BATCHES:
            for v in order:
                out = probes[v].ask(
                    op="step", batch=batch, prompt=PROMPT, short=SHORT, long=LONG, seed=r
                )
                runs[v].setdefault(f"step_ms_b{batch}", []).append(out["step_ms"])
                runs[v].setdefault(f"ttft_ms_b{batch}", []).append(out["ttft_ms"])
        for v in order:
            out = probes[v].ask(op="prefill", length=PREFILL, seed=r)
            runs[v].setdefault("prefill_tok_s", []).append(out["prefill_tok_s"])
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    return runs


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
    model.cpu()  # give the device memory back before the engines' measurements end
    torch.cuda.empty_cache()
    return step


def profile(variants: list[str], shape: str, args: argparse.Namespace, caches: dict) -> dict:
    results = {}
    for v in variants:
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        try:
            probe = EngineProbe(spec_for(v, shape, args, env=env), caches.get(v))
        except RuntimeError as exc:
            results[v] = {"error": str(exc)[-2000:]}
            continue
        results[v] = {
            f"b{b}": probe.ask(op="profile", batch=b, prompt=PROMPT, steps=16) for b in (1, 64)
        }
        probe.close()
    return results


def summarize(shape: str, runs: dict, rates: dict, init: dict, warm: dict) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    stock = runs.get("gpu-stock")
    for v, figures in runs.items():
        row: dict[str, Any] = {"init_cold_s": init.get(v), "init_warm_s": warm.get(v)}
        for key, values in figures.items():
            row[key] = statistics.median(values)
            if stock and key in stock and v != "gpu-stock":
                ratios = [a / b for a, b in zip(values, stock[key], strict=True)]
                row[f"{key}_vs_stock"] = statistics.median(ratios)
                row[f"{key}_vs_stock_range"] = [min(ratios), max(ratios)]
        for batch in BATCHES:
            limit = limit_ms(shape, batch, rates["copy_bytes_per_s"])
            row[f"limit_ms_b{batch}"] = limit
            row[f"frac_of_limit_b{batch}"] = limit / row[f"step_ms_b{batch}"]
        summary[v] = row
    return summary


def print_summary(summary: dict[str, Any], rates: dict[str, float]) -> None:
    print(
        f"\n{rates['device']}: copy {rates['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
        f"bf16 GEMM {rates['gemm_flops'] / 1e12:.0f} TFLOP/s"
    )
    head = f"{'engine':<24}" + "".join(
        f"{'b' + str(b) + ' ms':>10}{'x stock':>9}{'%lim':>6}" for b in BATCHES
    )
    head += f"{'ttft b1':>9}{'prefill t/s':>13}{'init':>8}{'warm':>7}"
    print(head + "\n" + "-" * len(head))
    for v, row in summary.items():
        line = f"{v:<24}"
        for b in BATCHES:
            ratio = row.get(f"step_ms_b{b}_vs_stock")
            line += f"{row[f'step_ms_b{b}']:>10.3f}"
            line += f"{ratio:>9.2f}" if ratio is not None else f"{'':>9}"
            line += f"{100 * row[f'frac_of_limit_b{b}']:>5.0f}%"
        line += f"{row['ttft_ms_b1']:>9.1f}{row['prefill_tok_s']:>13.0f}"
        line += f"{row['init_cold_s'] or 0:>8.1f}{row['init_warm_s'] or 0:>7.1f}"
        print(line)
    print("(ms per decode step; x stock = template / stock step time, median of per-round ratios)")


def chart(summary: dict[str, Any], shape: str, rates: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / (len(summary) + 1)
    for i, (v, row) in enumerate(summary.items()):
        xs = [j + i * width for j in range(len(BATCHES))]
        ax.bar(xs, [row[f"step_ms_b{b}"] for b in BATCHES], width, label=v)
    limit = next(iter(summary.values()))
    xs = [j + len(summary) * width for j in range(len(BATCHES))]
    ax.bar(
        xs,
        [limit[f"limit_ms_b{b}"] for b in BATCHES],
        width,
        label="bandwidth limit",
        color="lightgray",
        hatch="//",
    )
    ax.set_xticks(
        [j + 0.4 - width / 2 for j in range(len(BATCHES))], [f"batch {b}" for b in BATCHES]
    )
    ax.set_ylabel("ms per decode step (lower is better)")
    ax.set_title(f"{shape} Llama, bf16, {rates['device']}: decode step time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1.1b", choices=sorted(SHAPES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kv-cache-mib", type=int, default=4096)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    parser.add_argument("--warm-init", action="store_true", help="also time a second start")
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
    begin = time.perf_counter()
    rates = device_rates()
    import torch

    torch.cuda.empty_cache()  # the engines check the free memory when they start
    caches: dict[str, str] = {}
    probes, failed = start(variants, args.shape, args, caches)
    init = {v: p.init["init_s"] for v, p in probes.items()}
    caches = {v: p.cache_root for v, p in probes.items()}
    runs = measure(probes, args.rounds)
    for p in probes.values():
        p.close()
    warm: dict[str, float] = {}
    if args.warm_init:
        again, _ = start(list(probes), args.shape, args, caches)
        warm = {v: p.init["init_s"] for v, p in again.items()}
        for p in again.values():
            p.close()
    summary = summarize(args.shape, runs, rates, init, warm)
    print_summary(summary, rates)
    profiles = profile(list(probes), args.shape, args, caches) if args.profile else {}
    if profiles:
        print(json.dumps(profiles, indent=1))
    hf_ms = transformers_step_ms(args.shape) if args.transformers else None
    if hf_ms is not None:
        print(f"transformers eager, batch 1: {hf_ms:.2f} ms per decode step")
        for row in summary.values():
            row["transformers_b1_speedup"] = hf_ms / row["step_ms_b1"]
    result = {
        "shape": args.shape,
        "rates": rates,
        "summary": summary,
        "runs": runs,
        "failed": failed,
        "profiles": profiles,
        "transformers_step_ms_b1": hf_ms,
        "wall_s": time.perf_counter() - begin,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.chart and summary:
        chart(summary, args.shape, rates, args.chart)
    return 0 if summary and not failed else 1


if __name__ == "__main__":
    sys.exit(main())

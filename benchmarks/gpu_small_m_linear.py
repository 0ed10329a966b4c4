"""The decode step's projections at small M: cuBLAS (``F.linear``) against a Triton split-K GEMV.

    python benchmarks/gpu_small_m_linear.py --json out.json

``gpu_decode_profile.py`` found 90 % of the 8B decode step in cuBLAS GEMMs both engines
share, some of its kernels reading their weights well below the copy rate. This asks,
per Llama 3 8B projection and M, how fast cuBLAS reads each weight, and whether a plain
Triton split-K kernel (M rows x a tile of output columns x a share of K per program,
fp32 partial sums, then one reduce-and-cast kernel) reads it faster; nothing here is
wired into the plugin (the H100's answer: ``docs/performance.md``, "Where the decode step
goes").

Timing: each variant runs ``COPIES`` times in one CUDA graph, each call on its own copy
of the weight (together several times the L2, as in a step where 32 layers' weights pass
through it), replayed ``--replays`` times per round; per call = replay / copies; rounds
interleave the variants; median [range] over ``--rounds``. The Triton configurations are
swept per shape and M (the best is printed; a sweep's best over-fits a little: read the
margin, not the third digit). Every output is checked against ``F.linear``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

# (name, K, N): Llama 3 8B's projections (the lm head once per step)
SHAPES = (
    ("qkv", 4096, 6144),
    ("o", 4096, 4096),
    ("gate_up", 4096, 28672),
    ("down", 14336, 4096),
    ("lm_head", 4096, 128256),
)
CONFIGS = [
    {"block_n": bn, "block_k": bk, "split": s, "warps": w}
    for bn, bk, s, w in itertools.product((32, 64, 128), (256,), (1, 2, 4), (4,))
]


@triton.jit
def _splitk_kernel(
    x_ptr,
    w_ptr,
    part_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    K_PER_SPLIT: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(pid_k * K_PER_SPLIT, (pid_k + 1) * K_PER_SPLIT, BLOCK_K):
        offs_k = k + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_m[:, None] * K + offs_k[None, :], mask=offs_m[:, None] < M)
        w = tl.load(w_ptr + offs_n[:, None] * K + offs_k[None, :], mask=offs_n[:, None] < N)
        acc = tl.dot(x, tl.trans(w), acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(part_ptr + pid_k * M * N + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def _reduce_kernel(part_ptr, out_ptr, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT):
        acc += tl.load(part_ptr + s * MN + offs, mask=offs < MN, other=0.0)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=offs < MN)


def splitk_linear(x: torch.Tensor, w: torch.Tensor, part: torch.Tensor, out: torch.Tensor,
                  cfg: dict[str, int]) -> None:  # fmt: skip
    """``out = x @ w.T`` (x [M, K], w [N, K], both contiguous) in two launches; ``part``
    holds ``split * M * N`` float32 partial sums."""
    m, k = x.shape
    n = w.shape[0]
    split, block_k = cfg["split"], cfg["block_k"]
    _splitk_kernel[(triton.cdiv(n, cfg["block_n"]), split)](
        x, w, part, m, n, k, BLOCK_M=max(16, triton.next_power_of_2(m)),
        BLOCK_N=cfg["block_n"], BLOCK_K=block_k, K_PER_SPLIT=k // split,
        num_warps=cfg["warps"], num_stages=4,
    )  # fmt: skip
    _reduce_kernel[(triton.cdiv(m * n, 1024),)](part, out, m * n, SPLIT=split, BLOCK=1024)


def graph_of(calls: list[Any]) -> torch.cuda.CUDAGraph:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for call in calls:  # warm (compiles) outside the capture
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    return graph


def time_graph(graph: torch.cuda.CUDAGraph, replays: int) -> float:
    """Milliseconds per replay."""
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / replays


def _stat(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f}-{max(values):.2f}]"


def measure(weights: list[torch.Tensor], m: int, rounds: int, replays: int) -> dict[str, Any]:
    """Microseconds per call of cuBLAS and of each Triton configuration at M = ``m``, and
    each configuration's largest error against ``F.linear``."""
    n, k = weights[0].shape
    x = torch.randn(m, k, device=weights[0].device, dtype=torch.bfloat16)
    ref = torch.nn.functional.linear(x, weights[0]).float()
    out = torch.empty(m, n, device=x.device, dtype=torch.bfloat16)
    part = torch.empty(4 * m * n, device=x.device, dtype=torch.float32)

    def cublas(w: torch.Tensor) -> Any:
        return lambda: torch.nn.functional.linear(x, w)

    def triton_call(w: torch.Tensor, cfg: dict[str, int]) -> Any:
        return lambda: splitk_linear(x, w, part, out, cfg)

    variants: dict[str, Any] = {"cublas": graph_of([cublas(w) for w in weights])}
    errors = {}
    for cfg in CONFIGS:
        if (k // cfg["split"]) % cfg["block_k"]:
            continue
        key = "bn{block_n} bk{block_k} s{split} w{warps}".format(**cfg)
        try:
            splitk_linear(x, weights[0], part, out, cfg)
            torch.cuda.synchronize()
            errors[key] = (out.float() - ref).abs().max().item() / ref.abs().max().item()
            variants[key] = graph_of([triton_call(w, cfg) for w in weights])
        except Exception as exc:  # a configuration that does not compile is skipped
            print(f"  M={m} {key}: {type(exc).__name__}", file=sys.stderr)
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(rounds):
        for v, graph in variants.items():
            times[v].append(1000 * time_graph(graph, replays) / len(weights))
    return {"us": times, "max_error": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ms", default="1,8,32")
    parser.add_argument("--shapes", default="o,qkv,down")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"Triton {triton.__version__}; L2 {l2 >> 20} MiB", flush=True)  # fmt: skip
    results: list[dict[str, Any]] = []
    wanted = set(args.shapes.split(","))
    for name, k, n in (s for s in SHAPES if s[0] in wanted):
        nbytes = n * k * 2
        copies = max(2, min(16, -(-4 * l2 // nbytes)))
        weights = [
            torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k**0.5 for _ in range(copies)
        ]
        for m in (int(v) for v in args.ms.split(",")):
            r = measure(weights, m, args.rounds, args.replays)
            times = r["us"]
            best = min(
                (v for v in times if v != "cublas"), key=lambda v: statistics.median(times[v])
            )
            cub, tri = statistics.median(times["cublas"]), statistics.median(times[best])
            print(f"{name:8} M={m:<3} cuBLAS {_stat(times['cublas'])} us "
                  f"({nbytes / cub / 1e6:.2f} TB/s)  Triton best {_stat(times[best])} us "
                  f"({nbytes / tri / 1e6:.2f} TB/s) [{best}]  Triton / cuBLAS {tri / cub:.3f}  "
                  f"max error {r['max_error'][best]:.1e} of max |y|", flush=True)  # fmt: skip
            results.append({"shape": name, "k": k, "n": n, "m": m, "copies": copies,
                            "best": best, **r})  # fmt: skip
            torch.cuda.empty_cache()
        del weights
        if args.json:
            args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                             "results": results}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()

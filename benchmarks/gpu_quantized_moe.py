"""The GPU folder's W8A8 INT8 linear and fused-MoE kernels beside stock vLLM's, op by op.

Shapes of the models the GPU benchmark serves: Llama-3-8B's four linear layers in W8A8
(per-channel int8 weights, dynamic per-token activations) and one Mixtral-8x7B MoE block
(8 experts, top-2, 4096 -> 14336), bf16 and W8A8 INT8, at 1 and 32 tokens (decode). Each op is
captured in a CUDA graph of 20 calls and the graph replayed (median of 7 rounds, with
the range), so launch overhead counts as it does in vLLM's FULL graphs. Beside each:
stock vLLM's kernel where its compiled file is staged (Cutlass ``cutlass_scaled_mm`` with
``dynamic_scaled_int8_quant``; its Triton fused MoE needs ``_moe_C``, reported absent
when not staged), bf16 ``torch.mm`` for the linear layers, and the bytes each op must
read over the time (effective bandwidth).

    python benchmarks/gpu_quantized_moe.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from functools import partial

import torch

LINEAR_SHAPES = {  # Llama-3-8B: name -> (K, N)
    "qkv_proj": (4096, 6144),
    "o_proj": (4096, 4096),
    "gate_up_proj": (4096, 28672),
    "down_proj": (14336, 4096),
}
MOE_SHAPE = {"experts": 8, "top_k": 2, "hidden": 4096, "intermediate": 14336}
TOKENS = (1, 32)
CALLS_PER_GRAPH, ROUNDS = 20, 7


def time_graph(fn: Callable[[], object]) -> tuple[float, float, float]:
    """Median, min and max microseconds per call of ``fn`` replayed from a CUDA graph."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    samples = []
    for _ in range(ROUNDS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / CALLS_PER_GRAPH)
    return statistics.median(samples), min(samples), max(samples)


def stock_int8() -> Callable[..., torch.Tensor] | None:
    """Stock vLLM's CUDA W8A8 path (quantize, then Cutlass), or None where not staged."""
    try:
        from vllm import _custom_ops as ops

        torch.ops._C.cutlass_scaled_mm  # noqa: B018  (raises where _C is absent)
    except Exception:
        return None

    def run(x, weight_kn, scale_n, bias):
        q, x_scale, _ = ops.scaled_int8_quant(x, symmetric=True)
        return ops.cutlass_scaled_mm(q, weight_kn, x_scale, scale_n.view(-1, 1), x.dtype, bias)

    return run


def stock_moe(int8: bool = False) -> Callable[..., torch.Tensor] | None:
    """Stock vLLM's Triton fused MoE (``int8``: its W8A8 INT8 experts, per-channel weight
    scales and per-token activations, as vLLM's compressed-tensors INT8 method configures
    it), or None where its ``_moe_C`` is not staged."""
    try:
        torch.ops._moe_C.moe_align_block_size  # noqa: B018
        from vllm.model_executor.layers.fused_moe.config import int8_w8a8_moe_quant_config
        from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts
        from vllm.model_executor.layers.fused_moe.router.fused_topk_router import fused_topk
    except Exception:
        return None

    def run(x, logits, w13, w2, top_k, w13_scale=None, w2_scale=None):
        weights, ids, _ = fused_topk(x, logits, top_k, renormalize=True)
        config = None
        if int8:  # vLLM loads the scales as [E, N, 1]
            config = int8_w8a8_moe_quant_config(
                w13_scale[..., None], w2_scale[..., None], None, None, per_act_token_quant=True
            )
        return fused_experts(x, w13, w2, weights, ids, quant_config=config)

    return run


def bench_linear(report: dict) -> None:
    from vllm_platform_template.devices.gpu.kernels.int8_linear import w8a8_int8_linear

    stock = stock_int8()
    for name, (k, n) in LINEAR_SHAPES.items():
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        stock_weight = weight.t()  # Cutlass takes the column-major [K, N] view
        scale = torch.rand(n, device="cuda") / 100
        dense = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for m in TOKENS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            row: dict = {"op": f"w8a8 {name}", "tokens": m, "bytes": k * n + m * k * 2}
            row["template_us"] = time_graph(partial(w8a8_int8_linear, x, weight, scale, None))
            if stock is not None:
                row["stock_us"] = time_graph(partial(stock, x, stock_weight, scale, None))
            row["bf16_mm_us"] = time_graph(partial(torch.mm, x, dense))
            report["rows"].append(row)
            print_row(row)


def sweep_int8_tiles() -> None:
    """Time candidate tiles of the int8 GEMM at each decode size (for ``gemm_tiles``)."""
    from vllm_platform_template.devices.gpu.kernels import int8_linear

    chosen = int8_linear.gemm_tiles
    candidates = [
        (16, 32, 256, 4, 4), (16, 32, 512, 4, 4), (16, 64, 256, 4, 4), (16, 64, 512, 8, 3),
        (16, 128, 128, 4, 4), (32, 64, 256, 4, 4), (32, 32, 512, 4, 4), (64, 64, 128, 4, 4),
        (16, 32, 128, 4, 4), (16, 16, 512, 4, 4), (16, 64, 128, 4, 6), (32, 128, 128, 4, 4),
        (64, 128, 128, 8, 4), (16, 128, 256, 4, 3),
    ]  # fmt: skip
    for name, (k, n) in LINEAR_SHAPES.items():
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        scale = torch.rand(n, device="cuda") / 100
        for m in TOKENS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            times = []
            for tiles in candidates:
                if tiles[0] < m and m <= 16:
                    continue
                int8_linear.gemm_tiles = lambda rows, cols, tiles=tiles: tiles
                try:
                    us = time_graph(partial(int8_linear.w8a8_int8_linear, x, weight, scale))[0]
                except Exception as exc:  # a tile the compiler refuses
                    print(f"  {tiles}: {exc.__class__.__name__}")
                    continue
                times.append((us, tiles))
            int8_linear.gemm_tiles = chosen
            times.sort()
            print(f"sweep {name} M={m}: " + ", ".join(f"{t} {us:.1f}" for us, t in times[:4]))


def sweep_moe_tiles(report: dict) -> None:
    """Time the MoE block with candidate decode tiles for one of its two GEMMs (the other
    at ``gemm_tiles``' choice), bf16 and INT8 experts, at each decode size: the figures
    ``fused_moe.gemm_tiles`` is chosen from."""
    from vllm_platform_template.devices.gpu.kernels import fused_moe

    chosen = fused_moe.gemm_tiles
    e, k, h, i = (MOE_SHAPE[key] for key in ("experts", "top_k", "hidden", "intermediate"))
    candidates = [  # (BLOCK_N, BLOCK_K, warps, stages); BLOCK_M 16
        (64, 128, 4, 4), (32, 128, 4, 4), (16, 128, 4, 4), (32, 256, 4, 4),
        (16, 256, 4, 4), (16, 512, 4, 3), (64, 256, 4, 3), (32, 512, 4, 3),
    ]  # fmt: skip
    weights = {
        False: (
            torch.randn(e, 2 * i, h, device="cuda", dtype=torch.bfloat16) / 64,
            torch.randn(e, h, i, device="cuda", dtype=torch.bfloat16) / 64,
        ),
        True: (
            torch.randint(-127, 128, (e, 2 * i, h), dtype=torch.int8, device="cuda"),
            torch.randint(-127, 128, (e, h, i), dtype=torch.int8, device="cuda"),
        ),
    }
    scales = (torch.rand(e, 2 * i, device="cuda") / 5000, torch.rand(e, h, device="cuda") / 5000)
    for int8, (w13, w2) in weights.items():
        for m in TOKENS:
            x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
            logits = torch.randn(m, e, device="cuda")
            if int8:
                call = partial(fused_moe.fused_moe_w8a8_int8, x, logits, w13, scales[0], w2,
                               scales[1], k, True)  # fmt: skip
            else:
                call = partial(fused_moe.fused_moe, x, logits, w13, w2, k, True)
            for gemm, n in (("gate_up", 2 * i), ("down", h)):
                times = []
                for cand in candidates:

                    def tiles(pairs, experts, cols, depth, q=False, cand=cand, n=n):
                        if cols != n or fused_moe.block_m(pairs, experts) != 16:
                            return chosen(pairs, experts, cols, depth, q)
                        return (16, *cand)

                    fused_moe.gemm_tiles = tiles
                    try:
                        times.append((time_graph(call)[0], cand))
                    except Exception as exc:  # a tile the compiler refuses
                        print(f"  {cand}: {exc.__class__.__name__}")
                    finally:
                        fused_moe.gemm_tiles = chosen
                default = chosen(m * k, e, n, i if gemm == "down" else h, int8)
                times.sort()
                row = {"gemm": gemm, "int8": int8, "tokens": m, "chosen": list(default),
                       "times_us": [[us, list(c)] for us, c in times]}  # fmt: skip
                report.setdefault("moe_sweep", []).append(row)
                kind = "int8" if int8 else "bf16"
                print(f"sweep moe {kind} {gemm} M={m} (chosen {default}): "
                      + ", ".join(f"{c} {us:.1f}" for us, c in times[:4]), flush=True)  # fmt: skip


def bench_moe(report: dict) -> None:
    from vllm_platform_template.devices.gpu.kernels.fused_moe import fused_moe

    stock = stock_moe()
    e, k, h, i = (MOE_SHAPE[key] for key in ("experts", "top_k", "hidden", "intermediate"))
    w13 = torch.randn(e, 2 * i, h, device="cuda", dtype=torch.bfloat16) / 64
    w2 = torch.randn(e, h, i, device="cuda", dtype=torch.bfloat16) / 64
    for m in TOKENS:
        x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
        logits = torch.randn(m, e, device="cuda")
        touched = min(e, m * k)  # experts whose weights the step reads (at most)
        row: dict = {"op": "moe mixtral-8x7b", "tokens": m, "bytes": touched * 3 * h * i * 2}
        row["template_us"] = time_graph(partial(fused_moe, x, logits, w13, w2, k, True))
        if stock is not None:
            row["stock_us"] = time_graph(partial(stock, x, logits, w13, w2, k))
        report["rows"].append(row)
        print_row(row)


def bench_int8_moe(report: dict) -> None:
    from vllm_platform_template.devices.gpu.kernels.fused_moe import fused_moe_w8a8_int8

    stock = stock_moe(int8=True)
    e, k, h, i = (MOE_SHAPE[key] for key in ("experts", "top_k", "hidden", "intermediate"))
    w13 = torch.randint(-127, 128, (e, 2 * i, h), dtype=torch.int8, device="cuda")
    w2 = torch.randint(-127, 128, (e, h, i), dtype=torch.int8, device="cuda")
    w13_scale = torch.rand(e, 2 * i, device="cuda") / 5000
    w2_scale = torch.rand(e, h, device="cuda") / 5000
    for m in TOKENS:
        x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
        logits = torch.randn(m, e, device="cuda")
        touched = min(e, m * k)
        row: dict = {"op": "moe w8a8 mixtral-8x7b", "tokens": m, "bytes": touched * 3 * h * i}
        args = (x, logits, w13, w13_scale, w2, w2_scale, k, True)
        row["template_us"] = time_graph(partial(fused_moe_w8a8_int8, *args))
        if stock is not None:
            row["stock_us"] = time_graph(partial(stock, x, logits, w13, w2, k, w13_scale, w2_scale))
        report["rows"].append(row)
        print_row(row)


def print_row(row: dict) -> None:
    ours = row["template_us"][0]
    text = f"{row['op']:<22} M={row['tokens']:<3} template {ours:8.1f} us"
    text += f" ({row['bytes'] / ours / 1e3:6.0f} GB/s)"
    if "stock_us" in row:
        stock = row["stock_us"][0]
        text += f"  stock {stock:8.1f} us  template/stock speed {stock / ours:5.2f}"
    else:
        text += "  stock: not staged"
    if "bf16_mm_us" in row:
        text += f"  bf16 mm {row['bf16_mm_us'][0]:8.1f} us"
    print(text, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--sweep", action="store_true", help="time the int8 GEMM's tiles first")
    parser.add_argument("--sweep-moe", action="store_true", help="time the MoE GEMMs' tiles")
    parser.add_argument("--moe-only", action="store_true", help="skip the W8A8 linear layers")
    args = parser.parse_args()
    if args.sweep:
        sweep_int8_tiles()
    report: dict = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "method": f"CUDA graph of {CALLS_PER_GRAPH} calls, median [min, max] of {ROUNDS} rounds",
        "rows": [],
    }
    if args.sweep_moe:
        sweep_moe_tiles(report)
    if not args.moe_only:
        bench_linear(report)
    bench_moe(report)
    bench_int8_moe(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

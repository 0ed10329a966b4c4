"""The prefill attention kernels side by side on a CUDA GPU: tiles swept, SDPA beside.

Issue 57's prefill lever (``docs/performance.md``, "Prefill on the H200"): the
general kernel (``attention_prefill._paged_attention_kernel``, what TEMPLATE_ATTN
launches for a prefill today) reads every key through the block table; the
prefill kernel (``_prefill_attention_kernel``) reads the step's own new keys where
the step holds them (contiguous rows of ``key``/``value``) and only the cached
context through the table. For each shape (Llama 3 8B's heads: 32 query, 8 KV, 128
dims; bf16; block size 16) it times, with ``triton.testing.do_bench`` (CUDA events,
L2 flushed, median of the repeats; the lower of two runs):

- the general kernel as the planner launches it;
- the prefill kernel at every tile of ``PREFILL_TILES`` (the AOT compile test's);
- SDPA ``is_causal`` over dense K/V with the KV heads expanded (torch's flash
  attention: a reference speed, not what stock vLLM runs - that is FA3);

and checks each against SDPA (no cached context) or the general kernel (a chunk
after a cached prefix). No vLLM needed. Prints a table; ``--json PATH`` writes it.

    python benchmarks/gpu_prefill_kernel.py [--json out.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "devices" / "gpu" / "speed_tier")]

from gpu_kernels import _dense_kv, _paged_inputs, _planned_attention, bench_ms  # noqa: E402
from kernel_cases import PREFILL_TILES  # noqa: E402

from vllm_platform_template.devices.gpu.kernels import attention_prefill as prefill  # noqa: E402

HEADS = (32, 8, 128)
BLOCK_SIZE = 16
# (requests, new tokens each, cached context each)
SHAPES = ((1, 2048, 0), (1, 4096, 0), (8, 1024, 0), (1, 512, 2048))


def _shape_rows(batch: int, q_len: int, context: int, quick: bool) -> list[dict]:
    num_heads, num_kv_heads, head_size = HEADS
    group, scale = num_heads // num_kv_heads, head_size**-0.5
    seq_len = context + q_len
    _, key_cache, value_cache, block_table, seq_lens = _paged_inputs(
        batch, seq_len, num_kv_heads, head_size, BLOCK_SIZE
    )
    tokens = batch * q_len
    qsl = torch.arange(0, tokens + 1, q_len, device="cuda", dtype=torch.int32)
    query = torch.randn(tokens, num_heads, head_size, device="cuda", dtype=torch.bfloat16)
    # The step's new keys and values: the last q_len of each sequence, as strided views of
    # one [T, 2 * Hkv, D] tensor (how vLLM splits its qkv projection).
    rows = []
    for cache in (key_cache, value_cache):
        dense = cache[block_table.long()].permute(0, 2, 1, 3, 4)
        dense = dense.reshape(batch, num_kv_heads, -1, head_size)[:, :, context:seq_len]
        rows.append(dense.permute(0, 2, 1, 3).reshape(tokens, num_kv_heads, head_size))
    key, value = torch.cat(rows, dim=1).split([num_kv_heads, num_kv_heads], dim=1)

    general_out = torch.empty_like(query)
    general = _planned_attention(
        query, key_cache, value_cache, general_out, block_table, seq_lens, qsl, scale, q_len
    )
    general()
    if context == 0:
        q_dense = query.view(batch, q_len, num_heads, head_size).transpose(1, 2)
        k_dense = _dense_kv(key_cache, block_table, seq_len, group)
        v_dense = _dense_kv(value_cache, block_table, seq_len, group)

        def sdpa() -> torch.Tensor:
            return F.scaled_dot_product_attention(
                q_dense, k_dense, v_dense, is_causal=True, scale=scale
            )

        reference = sdpa().transpose(1, 2).reshape_as(query)
        reference_name = "sdpa"
    else:
        sdpa = None
        reference, reference_name = general_out, "general"
    flops = 4 * batch * num_heads * head_size * q_len * (context + (q_len + 1) / 2)

    def row(kernel: str, tile: object, ms: float, out: torch.Tensor | None) -> dict:
        error = None if out is None else (out.float() - reference.float()).abs().max().item()
        return {
            "shape": [batch, q_len, context],
            "kernel": kernel,
            "tile": tile,
            "ms": ms,
            "tflops": flops / (ms * 1e-3) / 1e12,
            "max_abs_err": error,
            "checked_against": reference_name,
        }

    results = [row("general", "planner", bench_ms(general, quick), general_out)]
    for tile in PREFILL_TILES[:2] if quick else PREFILL_TILES:
        out = torch.empty_like(query)
        config = prefill.PrefillConfig(*tile)

        def run(out: torch.Tensor = out, config: prefill.PrefillConfig = config) -> None:
            prefill.prefill_attention_unchecked(
                query, key, value, key_cache, value_cache, out, block_table, seq_lens, qsl,
                scale, config,
            )  # fmt: skip

        try:
            run()
            results.append(row("prefill", list(tile), bench_ms(run, quick), out))
        except Exception as exc:  # a tile past the registers or shared memory: say so
            print(f"{[batch, q_len, context]} tile {tile}: {type(exc).__name__}: {exc}")
    if sdpa is not None:
        results.append(row("sdpa_flash_expanded", "torch", bench_ms(sdpa, quick), None))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows to this JSON file")
    parser.add_argument("--quick", action="store_true", help="two tiles, shorter timing")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark", file=sys.stderr)
        return 1
    import triton

    torch.manual_seed(0)
    start = time.perf_counter()
    rows = []
    for batch, q_len, context in SHAPES:
        rows += _shape_rows(batch, q_len, context, args.quick)
        shape = [batch, q_len, context]
        best = min((r for r in rows if r["shape"] == shape), key=lambda r: r["ms"])
        general = next(r for r in rows if r["shape"] == shape and r["kernel"] == "general")
        print(f"\nrequests x new tokens, context {shape}: best {best['kernel']} {best['tile']}")
        print(f"{'kernel':<22}{'tile':<20}{'ms':>9}{'TFLOP/s':>9}{'vs general':>11}{'err':>10}")
        for r in sorted((r for r in rows if r["shape"] == shape), key=lambda r: r["ms"]):
            error = "-" if r["max_abs_err"] is None else f"{r['max_abs_err']:.1e}"
            print(
                f"{r['kernel']:<22}{r['tile']!s:<20}{r['ms']:>9.3f}{r['tflops']:>9.1f}"
                f"{general['ms'] / r['ms']:>10.2f}x{error:>10}"
            )
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "heads": HEADS,
        "block_size": BLOCK_SIZE,
        "rows": rows,
        "wall_s": time.perf_counter() - start,
    }
    print(f"\n{result['device']}, torch {result['torch']}, triton {result['triton']}, "
          f"{result['wall_s']:.0f} s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

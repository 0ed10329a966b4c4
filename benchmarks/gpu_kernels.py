"""Benchmark the template's Triton kernels on a CUDA GPU (no vLLM needed).

Measures, with ``triton.testing.do_bench`` (CUDA events, L2 flushed before each
run, median of the repeats):

- device copy bandwidth (``dst.copy_(src)`` of a 1 GiB tensor, bytes read + written);
- ``rms_norm`` and ``fused_add_rms_norm`` (Triton vs ``torch.compile`` of the
  native function vs eager native) at LLM-sized token x hidden shapes;
- ``silu_and_mul`` and ``gelu_and_mul_sparse`` likewise;
- paged-attention decode (batch 1/8/32, context 1024/4096, 32 query heads,
  8 KV heads, head size 128) vs ``scaled_dot_product_attention`` over dense
  contiguous K/V of the same length with the KV heads expanded to 32, both
  launched eagerly and replayed from CUDA graphs (kernel time without Python
  launch overhead, which dominates eager decode at batch 1);
- causal prefill through the same kernel vs SDPA ``is_causal`` (information:
  a gather-based kernel, not tuned to flash-attention speed).

For memory-bound ops it reports effective bandwidth (the fewest bytes the op
must move: each input read once, each output written once), its fraction of
the copy bandwidth, and the speedup over compiled native. Prints a table; with
``--json PATH`` also writes every figure. About 1.5 minutes on an H100 with
torch 2.11 / Triton 3.6 (a third of it ``torch.compile``); ``--no-compile``
skips the compiled baselines.

    python benchmarks/gpu_kernels.py [--json out.json] [--dtypes bf16,fp16] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from vllm_platform_template.reference_kernels.reference import (
    native_fused_add_rms_norm,
    native_gelu_and_mul_sparse,
    native_rms_norm,
)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ROW_SHAPES = ((4096, 4096), (8192, 8192), (16384, 4096), (32768, 8192))
GATED_SHAPES = ((4096, 2 * 14336), (16384, 2 * 4096), (8192, 2 * 8192))
DECODE_BATCHES = (1, 8, 32)
DECODE_CONTEXTS = (1024, 4096)
PREFILL_BATCHES = ((1, 4096), (8, 1024))  # (requests, tokens each), no cached context


# ---------------------------------------------------------------------------
# Native semantics (the baselines), as in vLLM IR
# ---------------------------------------------------------------------------


def native_silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


# ---------------------------------------------------------------------------
# Timing helpers
# ---------------------------------------------------------------------------


def bench_ms(fn: Callable[[], object], quick: bool) -> float:
    """Median time of ``fn`` in ms; the lower of two ``do_bench`` runs (guards against
    a transient slow run, e.g. clocks ramping up after a long ``torch.compile``)."""
    import triton.testing

    # A long warm-up: the first timing after a torch.compile pause was seen 50% slow.
    warmup, rep = (25, 40) if quick else (100, 100)
    return min(
        float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
        for _ in range(2)
    )


def bench_graph_ms(fn: Callable[[], object], quick: bool) -> float | None:
    """Time ``fn`` replayed from a CUDA graph: GPU time without Python launch overhead
    (how vLLM runs decode). None when capture fails."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # warm up (compile, allocate) outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return bench_ms(graph.replay, quick)
    except Exception as exc:
        print(f"CUDA graph capture failed ({type(exc).__name__}: {exc}); graph timing skipped")
        return None


class Compiler:
    """``torch.compile`` with a graceful fallback when Inductor is unavailable."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.problem: str | None = None if enabled else "disabled (--no-compile)"

    def compile(self, fn: Callable, *example_args) -> Callable | None:
        if self.problem is not None:
            return None
        try:
            compiled = torch.compile(fn, dynamic=False)
            compiled(*example_args)  # compile now, outside the timed region
            torch.cuda.synchronize()
            return compiled
        except Exception as exc:  # no Inductor / no C compiler / unsupported op
            self.problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            print(f"torch.compile unavailable, compiled baselines skipped ({self.problem})")
            return None


def _tbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e12


# ---------------------------------------------------------------------------
# Benchmarks
# ---------------------------------------------------------------------------


def copy_bandwidth(quick: bool) -> dict:
    n = (1 << 30) // 2  # 1 GiB of bf16
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), quick)
    nbytes = 2 * src.numel() * src.element_size()
    return {
        "op": "copy",
        "shape": [n],
        "dtype": "bf16",
        "bytes": nbytes,
        "ms": ms,
        "tbps": _tbps(nbytes, ms),
    }


def bench_row_ops(dtype_name: str, compiler: Compiler, copy_tbps: float, quick: bool) -> list[dict]:
    from vllm_platform_template.devices.gpu.kernels import layernorm

    dtype = DTYPES[dtype_name]
    rows = []
    for tokens, hidden in ROW_SHAPES[:2] if quick else ROW_SHAPES:
        x = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
        r = torch.randn_like(x)
        w = torch.randn(hidden, device="cuda", dtype=dtype)
        act = x.numel() * x.element_size()  # bytes of one activation tensor
        wb = w.numel() * w.element_size()
        shape = [tokens, hidden]
        # rms_norm reads x and w, writes out; the fused op reads x, r, w, writes x and r.
        rms_args = (x, w, 1e-6)
        rows.append(
            _measure("rms_norm", shape, dtype_name, 2 * act + wb, layernorm.rms_norm,
                     native_rms_norm, rms_args, compiler, copy_tbps, quick)
        )  # fmt: skip
        fused_args = (x, r, w, 1e-6)
        rows.append(
            _measure("fused_add_rms_norm", shape, dtype_name, 4 * act + wb,
                     layernorm.fused_add_rms_norm_, native_fused_add_rms_norm, fused_args,
                     compiler, copy_tbps, quick)
        )  # fmt: skip
    return rows


def bench_gated(dtype_name: str, compiler: Compiler, copy_tbps: float, quick: bool) -> list[dict]:
    from vllm_platform_template.devices.gpu.kernels import activation

    dtype = DTYPES[dtype_name]
    rows = []
    for tokens, width in GATED_SHAPES[:1] if quick else GATED_SHAPES:
        x = torch.randn(tokens, width, device="cuda", dtype=dtype)
        nbytes = x.numel() * x.element_size() * 3 // 2  # read [T, 2d], write [T, d]
        shape = [tokens, width]
        rows.append(
            _measure("silu_and_mul", shape, dtype_name, nbytes, activation.silu_and_mul,
                     native_silu_and_mul, (x,), compiler, copy_tbps, quick)
        )  # fmt: skip
        rows.append(
            _measure("gelu_and_mul_sparse", shape, dtype_name, nbytes,
                     activation.gelu_and_mul_sparse, native_gelu_and_mul_sparse,
                     (x, 1.6448536), compiler, copy_tbps, quick)
        )  # fmt: skip
    return rows


def _measure(
    op: str,
    shape: list[int],
    dtype_name: str,
    nbytes: int,
    triton_op: Callable,
    native: Callable,
    args: tuple,
    compiler: Compiler,
    copy_tbps: float,
    quick: bool,
) -> dict:
    """Time the Triton op, eager native and compiled native on the same arguments."""
    compiled = compiler.compile(native, *args)
    t_ms = bench_ms(lambda: triton_op(*args), quick)
    e_ms = bench_ms(lambda: native(*args), quick)
    c_ms = bench_ms(lambda: compiled(*args), quick) if compiled is not None else None
    return {
        "op": op,
        "shape": shape,
        "dtype": dtype_name,
        "bytes": nbytes,
        "triton_ms": t_ms,
        "compiled_ms": c_ms,
        "eager_ms": e_ms,
        "triton_tbps": _tbps(nbytes, t_ms),
        "frac_of_copy": _tbps(nbytes, t_ms) / copy_tbps,
        "speedup_vs_compiled": (c_ms / t_ms) if c_ms is not None else None,
        "speedup_vs_eager": e_ms / t_ms,
    }


def _paged_inputs(batch: int, context: int, num_kv_heads: int, head_size: int, block_size: int):
    """Random bf16 paged caches holding ``batch`` sequences of ``context`` tokens."""
    blocks_per_seq = math.ceil(context / block_size)
    num_blocks = batch * blocks_per_seq
    shape = (num_blocks, num_kv_heads, block_size, 2 * head_size)
    kv_cache = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    kv = kv_cache.view(num_blocks, num_kv_heads, 2 * block_size, head_size)
    key_cache, value_cache = kv.chunk(2, dim=2)
    block_table = torch.randperm(num_blocks, device="cuda", dtype=torch.int32)
    block_table = block_table.view(batch, blocks_per_seq)
    seq_lens = torch.full((batch,), context, device="cuda", dtype=torch.int32)
    return kv_cache, key_cache, value_cache, block_table, seq_lens


def _dense_kv(cache: torch.Tensor, block_table: torch.Tensor, context: int, group: int):
    """[batch, Hq, context, D] contiguous copy of a paged cache, KV heads expanded."""
    batch, num_kv_heads, head_size = block_table.shape[0], cache.shape[1], cache.shape[3]
    dense = cache[block_table.long()].permute(0, 2, 1, 3, 4)
    dense = dense.reshape(batch, num_kv_heads, -1, head_size)[:, :, :context]
    return dense.repeat_interleave(group, dim=1).contiguous()


def _planned_attention(
    query, key_cache, value_cache, out, block_table, seq_lens, qsl, scale, q_len
):
    """The attention as TEMPLATE_ATTN launches it: a plan made once, unchecked launches."""
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa
    from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout

    num_reqs = seq_lens.shape[0]
    layout = AttentionLayout(
        query.shape[1], key_cache.shape[1], query.shape[2], query.dtype, key_cache.shape[2]
    )
    planner = pa.TritonAttentionPlanner(layout, num_reqs, query.device)
    plan = planner.plan(num_reqs=num_reqs, num_tokens=query.shape[0], max_query_len=q_len)
    return functools.partial(
        pa.attend_unchecked,
        query,
        key_cache,
        value_cache,
        out,
        block_table,
        seq_lens,
        qsl,
        scale,
        plan,
    )


def bench_decode(quick: bool, copy_tbps: float) -> list[dict]:
    num_heads, num_kv_heads, head_size, block_size = 32, 8, 128, 16
    dtype = torch.bfloat16
    scale = head_size**-0.5
    rows = []
    batches = DECODE_BATCHES[::2] if quick else DECODE_BATCHES
    for batch in batches:
        for context in DECODE_CONTEXTS:
            kv_cache, key_cache, value_cache, block_table, seq_lens = _paged_inputs(
                batch, context, num_kv_heads, head_size, block_size
            )
            qsl = torch.arange(batch + 1, device="cuda", dtype=torch.int32)
            query = torch.randn(batch, num_heads, head_size, device="cuda", dtype=dtype)
            out = torch.empty_like(query)
            run_triton = _planned_attention(
                query, key_cache, value_cache, out, block_table, seq_lens, qsl, scale, 1
            )
            # Dense baseline: K/V gathered to [batch, Hq, context, D] (GQA expanded), untimed.
            group = num_heads // num_kv_heads
            k_dense = _dense_kv(key_cache, block_table, context, group)
            v_dense = _dense_kv(value_cache, block_table, context, group)
            q_dense = query.unsqueeze(2)  # [batch, Hq, 1, D]
            run_sdpa = functools.partial(
                F.scaled_dot_product_attention, q_dense, k_dense, v_dense, scale=scale
            )

            run_triton()
            ref = run_sdpa().squeeze(2)
            max_err = (out.float() - ref.float()).abs().max().item()
            t_ms = bench_ms(run_triton, quick)
            s_ms = bench_ms(run_sdpa, quick)
            t_graph = bench_graph_ms(run_triton, quick)
            s_graph = bench_graph_ms(run_sdpa, quick)
            # Kernel speed: graph replays when both captured, else eager launches.
            t_best, s_best = (t_graph, s_graph) if t_graph and s_graph else (t_ms, s_ms)
            kv_bytes = 2 * batch * context * num_kv_heads * head_size * kv_cache.element_size()
            rows.append(
                {
                    "op": "paged_decode",
                    "batch": batch,
                    "context": context,
                    "heads": [num_heads, num_kv_heads, head_size],
                    "dtype": "bf16",
                    "triton_ms": t_ms,
                    "sdpa_expanded_ms": s_ms,
                    "triton_graph_ms": t_graph,
                    "sdpa_expanded_graph_ms": s_graph,
                    "speedup_vs_sdpa": s_best / t_best,
                    "speedup_vs_sdpa_eager": s_ms / t_ms,
                    "kv_bytes": kv_bytes,
                    "triton_tbps": _tbps(kv_bytes, t_best),
                    "frac_of_copy": _tbps(kv_bytes, t_best) / copy_tbps,
                    "max_abs_err_vs_sdpa": max_err,
                }
            )
    return rows


# ---------------------------------------------------------------------------
# Host time of one attention layer call (KV write + attention)
# ---------------------------------------------------------------------------

LAYER_CALLS = 2000


def _template_attn_layer(query, key, value, kv_cache, seq_lens, block_table, qsl, slots):
    """One ``TEMPLATE_ATTN`` layer call as vLLM makes it eagerly (needs vLLM importable):
    ``do_kv_cache_update`` then ``forward`` on the builder's metadata."""
    import os
    from types import SimpleNamespace

    from vllm_platform_template.devices.gpu.identity import IDENTITY

    # vLLM resolves its platform on import: the template's (stock CUDA needs compiled vLLM).
    os.environ.setdefault("VLLM_TEMPLATE_DEVICE", IDENTITY.device_type)

    from vllm.v1.attention.backend import CommonAttentionMetadata
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    from vllm_platform_template.attention.impl import TemplateAttentionImpl
    from vllm_platform_template.attention.metadata import TemplateAttentionMetadataBuilder

    num_heads, head_size = query.shape[1], query.shape[2]
    num_kv_heads, block_size = kv_cache.shape[1], kv_cache.shape[2]
    spec = FullAttentionSpec(
        block_size=block_size, num_kv_heads=num_kv_heads, head_size=head_size, dtype=query.dtype
    )
    config = SimpleNamespace(
        model_config=SimpleNamespace(get_num_attention_heads=lambda _: num_heads),
        parallel_config=None,
        additional_config={},
        compilation_config=SimpleNamespace(static_forward_context={}),
        scheduler_config=SimpleNamespace(max_num_seqs=seq_lens.shape[0]),
    )
    builder = TemplateAttentionMetadataBuilder(spec, ["layer"], config, query.device)
    common = CommonAttentionMetadata(
        query_start_loc=qsl,
        query_start_loc_cpu=qsl.cpu(),
        seq_lens=seq_lens,
        num_reqs=seq_lens.shape[0],
        num_actual_tokens=query.shape[0],
        max_query_len=1,
        max_seq_len=int(seq_lens.max()),
        block_table_tensor=block_table,
        slot_mapping=slots,
    )
    metadata = builder.build(0, common)
    impl = TemplateAttentionImpl(num_heads, head_size, head_size**-0.5, num_kv_heads)
    layer = torch.nn.Module()
    output = torch.empty_like(query)

    def call() -> None:
        impl.do_kv_cache_update(layer, key, value, kv_cache, slots)
        impl.forward(layer, query, key, value, kv_cache, metadata, output)

    return call


def bench_layer_host(quick: bool) -> list[dict]:
    """Host time per attention layer call on the eager/piecewise path, decode at batch 1.

    A batch-1 decode over 512 keys costs the GPU a few microseconds, so a loop of
    calls is bound by the host: its wall time per call is the host time (the GPU
    time per call, from a CUDA graph of the same calls, is printed beside it to
    show the loop was host-bound). Three ways to make the call: the public
    functions (checked every call), the planned unchecked launches, and
    ``TEMPLATE_ATTN``'s layer (impl) as vLLM calls it, when vLLM is importable.
    """
    from vllm_platform_template.devices.gpu.kernels import kv_write
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa

    num_heads, num_kv_heads, head_size, block_size, context = 32, 8, 128, 16, 512
    kv_cache, key_cache, value_cache, block_table, seq_lens = _paged_inputs(
        1, context, num_kv_heads, head_size, block_size
    )
    qsl = torch.arange(2, device="cuda", dtype=torch.int32)
    query = torch.randn(1, num_heads, head_size, device="cuda", dtype=torch.bfloat16)
    key = torch.randn(1, num_kv_heads, head_size, device="cuda", dtype=torch.bfloat16)
    value = torch.randn_like(key)
    slots = torch.tensor([context - 1], device="cuda", dtype=torch.int64)
    out = torch.empty_like(query)
    scale = head_size**-0.5
    planned = _planned_attention(
        query, key_cache, value_cache, out, block_table, seq_lens, qsl, scale, 1
    )

    def checked() -> None:
        kv_write.reshape_and_cache_(key, value, key_cache, value_cache, slots)
        pa.paged_attention(query, key_cache, value_cache, out, block_table, seq_lens, qsl, scale, 1)

    def unchecked() -> None:
        kv_write.write_kv_unchecked(key, value, key_cache, value_cache, slots)
        planned()

    def write_jit() -> None:  # Triton binds and specializes every call
        ks, kcs = key.stride(), key_cache.stride()
        kv_write._reshape_and_cache_kernel[(1, 1)](
            key, value, key_cache, value_cache, slots, ks[0], ks[1], ks[0], ks[1],
            kcs[0], kcs[1], kcs[2], kcs[0], kcs[1], kcs[2], block_size,
            key_cache.shape[0] * block_size, num_kv_heads, head_size, BLOCK_H=8, BLOCK_D=128,
        )  # fmt: skip

    def write_planned() -> None:
        kv_write.write_kv_unchecked(key, value, key_cache, value_cache, slots)

    variants: dict[str, Callable[[], None]] = {
        "KV write, Triton JIT": write_jit,
        "KV write, Launch": write_planned,
        "public, checked": checked,
        "planned": unchecked,
    }
    try:
        variants["TEMPLATE_ATTN layer"] = _template_attn_layer(
            query, key, value, kv_cache, seq_lens, block_table, qsl, slots
        )
    except ImportError as exc:
        print(f"(TEMPLATE_ATTN layer not measured: vLLM is not importable: {exc})")
    calls = LAYER_CALLS // 4 if quick else LAYER_CALLS
    rows = []
    for name, call in variants.items():
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                call()
            best = min(best, (time.perf_counter() - start) / calls)
            torch.cuda.synchronize()
        gpu_ms = bench_graph_ms(call, quick)
        rows.append(
            {
                "op": "attention_layer_call",
                "path": name,
                "batch": 1,
                "context": context,
                "host_us": best * 1e6,
                "gpu_us": gpu_ms * 1e3 if gpu_ms is not None else None,
            }
        )
    return rows


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def _fmt(v, spec: str = ".3f") -> str:
    return "n/a" if v is None else format(v, spec)


def bench_prefill(quick: bool) -> list[dict]:
    """Causal prefill (no cached context) vs SDPA ``is_causal`` over dense expanded K/V."""
    num_heads, num_kv_heads, head_size, block_size = 32, 8, 128, 16
    group, scale = num_heads // num_kv_heads, head_size**-0.5
    rows = []
    for batch, q_len in PREFILL_BATCHES[:1] if quick else PREFILL_BATCHES:
        _, key_cache, value_cache, block_table, seq_lens = _paged_inputs(
            batch, q_len, num_kv_heads, head_size, block_size
        )
        qsl = torch.arange(0, (batch + 1) * q_len, q_len, device="cuda", dtype=torch.int32)
        query = torch.randn(
            batch * q_len, num_heads, head_size, device="cuda", dtype=torch.bfloat16
        )
        out = torch.empty_like(query)
        run_triton = _planned_attention(
            query, key_cache, value_cache, out, block_table, seq_lens, qsl, scale, q_len
        )
        q_dense = query.view(batch, q_len, num_heads, head_size).transpose(1, 2)
        k_dense = _dense_kv(key_cache, block_table, q_len, group)
        v_dense = _dense_kv(value_cache, block_table, q_len, group)
        run_sdpa = functools.partial(
            F.scaled_dot_product_attention, q_dense, k_dense, v_dense, is_causal=True, scale=scale
        )
        run_triton()
        ref = run_sdpa().transpose(1, 2).reshape_as(out)
        max_err = (out.float() - ref.float()).abs().max().item()
        t_ms, s_ms = bench_ms(run_triton, quick), bench_ms(run_sdpa, quick)
        flops = 4 * batch * num_heads * head_size * q_len * (q_len + 1) / 2
        rows.append(
            {
                "op": "paged_prefill",
                "requests": batch,
                "q_len": q_len,
                "heads": [num_heads, num_kv_heads, head_size],
                "dtype": "bf16",
                "triton_ms": t_ms,
                "sdpa_causal_expanded_ms": s_ms,
                "speedup_vs_sdpa": s_ms / t_ms,
                "triton_tflops": flops / (t_ms * 1e-3) / 1e12,
                "max_abs_err_vs_sdpa": max_err,
            }
        )
    return rows


def print_table(results: dict) -> None:
    copy = results["copy"]
    print(f"\ndevice: {results['device']}  torch {results['torch']}  triton {results['triton']}")
    print(
        f"copy bandwidth: {copy['tbps']:.2f} TB/s "
        f"({copy['ms']:.3f} ms for {copy['bytes'] / 1e9:.1f} GB)"
    )
    if results["compile_problem"]:
        print(f"compiled baselines: {results['compile_problem']}")
    header = (
        f"{'op':<22}{'shape':<16}{'dtype':<6}{'triton ms':>10}{'compiled':>10}{'eager':>10}"
        f"{'TB/s':>7}{'%copy':>7}{'x comp':>8}{'x eager':>8}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for r in results["row_ops"]:
        print(
            f"{r['op']:<22}{'x'.join(map(str, r['shape'])):<16}{r['dtype']:<6}"
            f"{r['triton_ms']:>10.3f}{_fmt(r['compiled_ms']):>10}{r['eager_ms']:>10.3f}"
            f"{r['triton_tbps']:>7.2f}{100 * r['frac_of_copy']:>6.0f}%"
            f"{_fmt(r['speedup_vs_compiled'], '.2f'):>8}{r['speedup_vs_eager']:>8.2f}"
        )
    header = (
        f"{'paged decode':<14}{'batch':>6}{'context':>8}{'triton':>9}{'sdpa':>9}"
        f"{'graph':>9}{'sdpa gr':>9}{'x sdpa':>8}{'KV TB/s':>8}{'%copy':>7}{'max err':>9}"
    )
    print("\n(ms; 'graph' = CUDA-graph replay, no launch overhead; x sdpa, TB/s from graph times)")
    print(header + "\n" + "-" * len(header))
    for r in results["decode"]:
        print(
            f"{'32q/8kv/128':<14}{r['batch']:>6}{r['context']:>8}{r['triton_ms']:>9.3f}"
            f"{r['sdpa_expanded_ms']:>9.3f}{_fmt(r['triton_graph_ms']):>9}"
            f"{_fmt(r['sdpa_expanded_graph_ms']):>9}{r['speedup_vs_sdpa']:>8.2f}"
            f"{r['triton_tbps']:>8.2f}{100 * r['frac_of_copy']:>6.0f}%"
            f"{r['max_abs_err_vs_sdpa']:>9.1e}"
        )
    header = (
        f"{'paged prefill':<14}{'reqs':>6}{'q_len':>8}{'triton':>9}{'sdpa':>9}"
        f"{'x sdpa':>8}{'TFLOP/s':>9}{'max err':>9}"
    )
    print("\n(ms; causal, no cached context; SDPA over dense K/V with KV heads expanded)")
    print(header + "\n" + "-" * len(header))
    for r in results["prefill"]:
        print(
            f"{'32q/8kv/128':<14}{r['requests']:>6}{r['q_len']:>8}{r['triton_ms']:>9.3f}"
            f"{r['sdpa_causal_expanded_ms']:>9.3f}{r['speedup_vs_sdpa']:>8.2f}"
            f"{r['triton_tflops']:>9.1f}{r['max_abs_err_vs_sdpa']:>9.1e}"
        )
    print("\n(us per attention layer call, KV write + attention, batch-1 decode over 512 keys;")
    print(" host: a loop of eager calls, GPU: the same calls replayed from a CUDA graph)")
    header = f"{'layer call':<22}{'host us':>9}{'GPU us':>9}"
    print(header + "\n" + "-" * len(header))
    for r in results["layer_host"]:
        print(f"{r['path']:<22}{r['host_us']:>9.1f}{_fmt(r['gpu_us'], '.1f'):>9}")
    print(f"\ntotal wall time: {results['wall_s']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write all figures to this JSON file")
    parser.add_argument("--dtypes", default="bf16,fp16", help="row-op dtypes: bf16,fp16,fp32")
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repeats")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile baselines")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark", file=sys.stderr)
        return 1
    import triton

    start = time.perf_counter()
    torch.manual_seed(0)
    compiler = Compiler(enabled=not args.no_compile)
    copy = copy_bandwidth(args.quick)
    row_ops: list[dict] = []
    for name in args.dtypes.split(","):
        if name not in DTYPES:
            parser.error(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
        row_ops += bench_row_ops(name, compiler, copy["tbps"], args.quick)
        row_ops += bench_gated(name, compiler, copy["tbps"], args.quick)
    decode = bench_decode(args.quick, copy["tbps"])
    prefill = bench_prefill(args.quick)
    layer_host = bench_layer_host(args.quick)
    results = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "compile_problem": compiler.problem,
        "copy": copy,
        "row_ops": row_ops,
        "decode": decode,
        "prefill": prefill,
        "layer_host": layer_host,
        "wall_s": time.perf_counter() - start,
    }
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

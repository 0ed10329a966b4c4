"""One decode step's attention per layer on a CUDA GPU: the template against FA3, plans swept.

Issue 57's decode lever (``docs/performance.md``, "Decode attention"): what one decode
step launches per layer - the template's KV write, split-KV decode kernel and merge
(``TEMPLATE_ATTN``'s plan, ``kernels/paged_attention.py``) - against what stock vLLM
0.32's FLASH_ATTN backend launches under FULL decode graphs: its
``reshape_and_cache_flash`` and FA3 (``_vllm_fa3_C`` ``fwd`` over the paged cache, with
the scheduler metadata its builder makes outside the graph, at most 32 splits). Llama
3 8B's attention by default (32 query heads, 8 KV, 128 dims; ``--heads``), bf16, block
size 16 as both engines use, batch 1 and 32 (``--batches``), contexts 128 to 2048
(``--contexts``; ``gpu_e2e.py``'s decode steps see 144-272). The template is timed at
the planner's plan for each shape (``template``), at its one plan before the sweep
(``before``, :data:`PREVIOUS`) and at any ``--config``.

Timing: ``LAYERS`` layers, each with its own cache (one block table, as one KV-cache
group shares), captured in one CUDA graph as a FULL decode graph holds them, replayed
under ``triton.testing.do_bench`` (L2 flushed before each replay; the median replay);
per layer = replay / ``LAYERS``. The variants of a shape are timed in interleaved
rounds; each figure is the median over the rounds with their range. Every variant's
layer-0 output is checked against float32 attention over the same cache.

The reference is FA3 when ``--stock DIR`` holds stock's ``_vllm_fa3_C.abi3.so`` (and
``_C_stable_libtorch.abi3.so`` for its KV write; without it the template's KV write
stands in, said in the table); else torch's SDPA over dense K/V with the KV heads
expanded (not what stock runs). The output names the reference.

``--sweep``: coordinate descent over ``attention_decode.DecodeConfig`` (keys per
step, keys per split, programs per multiprocessor, warps, stages, the merge's warps)
from the planner's choice, twice over the fields, separately for each batch (scored by
the geometric mean over ``SWEEP_CONTEXTS``); the winners then join the table at every
shape. ``--profile``: kernel time per layer under the torch profiler (graph replays),
by kernel, for the template's plans and the reference. No vLLM needed.

    python benchmarks/gpu_decode_kernel.py [--stock DIR] [--sweep] [--profile]
        [--batches 1,32] [--contexts 256,2048] [--json out.json] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vllm_platform_template.devices.gpu.kernels import attention_decode  # noqa: E402
from vllm_platform_template.devices.gpu.kernels import paged_attention as pa  # noqa: E402
from vllm_platform_template.devices.gpu.kernels.attention_decode import DecodeConfig  # noqa: E402
from vllm_platform_template.devices.gpu.kernels.kv_write import write_kv_unchecked  # noqa: E402
from vllm_platform_template.reference_kernels.paged_attention.contract import (  # noqa: E402
    AttentionLayout,
)
from vllm_platform_template.reference_kernels.paged_attention.reference import (  # noqa: E402
    split_kv_cache,
)

HEADS = (32, 8, 128)
BLOCK_SIZE = 16
LAYERS = 32
DEVICE = "cuda"
BATCHES = (1, 32)
CONTEXTS = (128, 256, 512, 1024, 2048)
SWEEP_CONTEXTS = (256, 2048)
PREVIOUS = DecodeConfig(
    tile_n=64, min_keys=256, num_warps=4, num_stages=2, programs_per_sm=2, combine_warps=4
)
"""The planner's one decode plan before the sweep (code cf12afc), timed as ``before``."""
FA3_MAX_SPLITS = 32  # vLLM 0.32's flash_attn_max_num_splits_for_cuda_graph
SWEEP_VALUES: dict[str, tuple[int, ...]] = {
    "min_keys": (64, 128, 256, 512),
    "programs_per_sm": (1, 2, 4, 8),
    "tile_n": (16, 32, 64, 128),
    "num_warps": (1, 2, 4, 8),
    "num_stages": (1, 2, 3, 4),
    "combine_warps": (1, 2, 4),
}


# ---------------------------------------------------------------------------
# Inputs: LAYERS caches of one shape
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    """One decode step's inputs for every layer: caches, new rows, outputs, metadata."""

    batch: int
    context: int
    kv: list[torch.Tensor]  # [num_blocks, Hkv, block, 2D] per layer (both engines' layout)
    query: list[torch.Tensor]  # [B, Hq, D]
    key: list[torch.Tensor]  # [B, Hkv, D], views of one qkv row as vLLM splits it
    value: list[torch.Tensor]
    out: list[torch.Tensor]
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    qsl: torch.Tensor
    slots: torch.Tensor

    @property
    def kv_bytes(self) -> int:
        """Bytes of K and V one layer's attention must read."""
        hkv, d = HEADS[1], HEADS[2]
        return 2 * self.batch * self.context * hkv * d * self.kv[0].element_size()


def make_step(batch: int, context: int, layers: int) -> Step:
    hq, hkv, d = HEADS
    blocks_per_seq = math.ceil(context / BLOCK_SIZE)
    num_blocks = batch * blocks_per_seq
    block_table = torch.randperm(num_blocks, device=DEVICE, dtype=torch.int32)
    block_table = block_table.view(batch, blocks_per_seq)
    seq_lens = torch.full((batch,), context, device=DEVICE, dtype=torch.int32)
    qsl = torch.arange(batch + 1, device=DEVICE, dtype=torch.int32)
    last = context - 1  # the step's new token: the last of each sequence
    slots = (
        block_table[:, last // BLOCK_SIZE].long() * BLOCK_SIZE + last % BLOCK_SIZE
    ).contiguous()
    kv, query, key, value, out = [], [], [], [], []
    for _ in range(layers):
        kv.append(
            torch.randn((num_blocks, hkv, BLOCK_SIZE, 2 * d), device=DEVICE, dtype=torch.bfloat16)
        )
        qkv = torch.randn(batch, hq + 2 * hkv, d, device=DEVICE, dtype=torch.bfloat16)
        q, k, v = qkv.split([hq, hkv, hkv], dim=1)
        query.append(q.contiguous())
        key.append(k)
        value.append(v)
        out.append(torch.empty(batch, hq, d, device=DEVICE, dtype=torch.bfloat16))
    return Step(batch, context, kv, query, key, value, out, block_table, seq_lens, qsl, slots)


def _template_caches(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return split_kv_cache(kv)  # [nb, Hkv, block, D] each (the template's plain interior)


def _stock_caches(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = kv.shape[-1] // 2  # stock's FLASH_ATTN split: [nb, block, Hkv, D] each
    key_cache, value_cache = kv.transpose(1, 2).split(d, dim=-1)
    return key_cache, value_cache


def reference(step: Step, layer: int, caches: Callable, heads_dim: int) -> torch.Tensor:
    """float32 attention of layer ``layer``'s query over its cache (the layout ``caches``
    splits, the KV-head dimension of a cache block ``heads_dim``): [B, Hq, D]."""
    hq, hkv, d = HEADS
    key_cache, value_cache = caches(step.kv[layer])
    rows = []
    for cache in (key_cache, value_cache):
        blocks = cache[step.block_table.long()]  # [B, nblk, ...]
        # [B, nblk, block, Hkv, D] (stock's) or [B, nblk, Hkv, block, D] -> [B, Hkv, nblk, block, D]
        blocks = blocks.permute(0, 3, 1, 2, 4) if heads_dim == 2 else blocks.permute(0, 2, 1, 3, 4)
        dense = blocks.reshape(step.batch, hkv, -1, d)[:, :, : step.context].float()
        rows.append(dense.repeat_interleave(hq // hkv, dim=1))
    q = step.query[layer].float().unsqueeze(2)  # [B, Hq, 1, D]
    weights = torch.softmax(q @ rows[0].transpose(2, 3) * d**-0.5, dim=-1)
    return (weights @ rows[1]).squeeze(2)


# ---------------------------------------------------------------------------
# The variants: one decode step's attention for every layer
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Variant:
    name: str
    layer: Callable[[Step, int], None]  # launches one layer's kernels
    caches: Callable  # how this variant splits a layer's cache
    heads_dim: int
    checks_output: bool = True
    plan: DecodeConfig | None = None


def template_variant(
    name: str, step: Step, config: DecodeConfig | None, *, write: bool = True, attend: bool = True
) -> Variant:
    hq, hkv, d = HEADS
    layout = AttentionLayout(hq, hkv, d, torch.bfloat16, BLOCK_SIZE)
    planner = pa.TritonAttentionPlanner(layout, step.batch, torch.device(DEVICE), decode=config)
    plan = planner.plan(num_reqs=step.batch, num_tokens=step.batch, max_query_len=1)
    caches = [_template_caches(kv) for kv in step.kv]
    scale = d**-0.5

    def layer(step: Step, i: int) -> None:
        key_cache, value_cache = caches[i]
        if write:
            write_kv_unchecked(step.key[i], step.value[i], key_cache, value_cache, step.slots)
        if attend:
            pa.attend_unchecked(
                step.query[i], key_cache, value_cache, step.out[i], step.block_table,
                step.seq_lens, step.qsl, scale, plan, step.key[i], step.value[i],
            )  # fmt: skip

    return Variant(
        name,
        layer,
        _template_caches,
        1,
        checks_output=attend,
        plan=planner.decode_config(step.batch),
    )


class Stock:
    """Stock vLLM 0.32's compiled files, loaded from a folder (no vLLM Python needed)."""

    def __init__(self, folder: Path | None) -> None:
        self.fa3 = self.kv_write = None
        self.problems: list[str] = []
        if folder is None:
            self.problems.append("no --stock folder")
            return
        for name, attr in (("_vllm_fa3_C", "fa3"), ("_C_stable_libtorch", "kv_write")):
            path = folder / f"{name}.abi3.so"
            try:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None or not path.exists():
                    raise ImportError(f"{path} not found")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                if attr == "fa3":
                    self.fa3 = torch.ops._vllm_fa3_C
                else:
                    self.kv_write = torch.ops._C_cache_ops.reshape_and_cache_flash
            except Exception as exc:  # missing, or built for another torch: say so
                self.problems.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")

    def variant(self, name: str, step: Step, *, write: bool = True, attend: bool = True) -> Variant:
        """FA3 as vLLM 0.32's FLASH_ATTN calls it in a FULL decode graph: scheduler
        metadata from the builder (outside the graph, once a step), ``num_splits`` its
        graph bound; the KV write ``reshape_and_cache_flash`` (else the template's)."""
        assert self.fa3 is not None
        hq, hkv, d = HEADS
        caches = [_stock_caches(kv) for kv in step.kv]
        fa3 = self.fa3
        scheduler = fa3.get_scheduler_metadata(
            step.batch, 1, step.context, hq, hkv, d, d, torch.bfloat16, step.seq_lens,
            step.qsl, None, None, None, None, BLOCK_SIZE, 0, True, -1, -1, False,
            FA3_MAX_SPLITS, None, 0,
        )  # fmt: skip
        one = torch.ones((), device=DEVICE, dtype=torch.float32)
        template_caches = [_template_caches(kv) for kv in step.kv]
        scale = d**-0.5

        def layer(step: Step, i: int) -> None:
            key_cache, value_cache = caches[i]
            if write and self.kv_write is not None:
                self.kv_write(
                    step.key[i], step.value[i], key_cache, value_cache, step.slots, "auto",
                    one, one,
                )  # fmt: skip
            elif write:  # the template's KV write stands in (same bytes)
                write_kv_unchecked(step.key[i], step.value[i], *template_caches[i], step.slots)
            if attend:
                fa3.fwd(
                    step.query[i], key_cache, value_cache, None, None, None, step.out[i],
                    step.qsl, None, None, None, step.seq_lens, 1, step.context,
                    step.block_table, None, None, None, None, None, None, None, None, scale,
                    True, -1, -1, 0.0, True, scheduler, FA3_MAX_SPLITS, None, 0, None, 1, 0,
                    None,
                )  # fmt: skip

        return Variant(name, layer, _stock_caches, 2, checks_output=attend)


def sdpa_variant(name: str, step: Step) -> Variant:
    """SDPA over dense K/V (KV heads expanded) per layer: a reference speed only."""
    hq, hkv, d = HEADS
    dense = []
    for i in range(len(step.kv)):
        kc, vc = _template_caches(step.kv[i])
        pair = []
        for cache in (kc, vc):
            blocks = cache[step.block_table.long()].permute(0, 2, 1, 3, 4)
            rows = blocks.reshape(step.batch, hkv, -1, d)[:, :, : step.context]
            pair.append(rows.repeat_interleave(hq // hkv, dim=1).contiguous())
        dense.append(pair)

    def layer(step: Step, i: int) -> None:
        out = F.scaled_dot_product_attention(
            step.query[i].unsqueeze(2), dense[i][0], dense[i][1], scale=d**-0.5
        )
        step.out[i].copy_(out.squeeze(2))

    return Variant(name, layer, _template_caches, 1)


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def capture(step: Step, variant: Variant) -> torch.cuda.CUDAGraph:
    """Every layer's launches of one step in one CUDA graph (compiled and warmed first)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(len(step.kv)):
            variant.layer(step, i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(len(step.kv)):
            variant.layer(step, i)
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, layers: int, rep_ms: int) -> float:
    """Median replay time (L2 flushed before each) per layer, in microseconds."""
    import triton.testing

    ms = triton.testing.do_bench(graph.replay, warmup=5, rep=rep_ms, return_mode="median")
    return float(ms) * 1e3 / layers


def output_error(step: Step, variant: Variant, graph: torch.cuda.CUDAGraph) -> float | None:
    if not variant.checks_output:
        return None
    graph.replay()
    torch.cuda.synchronize()
    expected = reference(step, 0, variant.caches, variant.heads_dim)
    return (step.out[0].float() - expected).abs().max().item()


def time_variants(step: Step, variants: list[Variant], rounds: int, rep_ms: int) -> dict[str, dict]:
    """Each variant's per-layer time over ``rounds`` interleaved rounds (median, range)."""
    graphs: dict[str, torch.cuda.CUDAGraph] = {}
    results: dict[str, dict] = {}
    for variant in variants:
        try:
            graphs[variant.name] = capture(step, variant)
        except Exception as exc:  # a config past the registers or shared memory: say so
            results[variant.name] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
            continue
        err = output_error(step, variant, graphs[variant.name])
        results[variant.name] = {"max_abs_err": err, "rounds_us": []}
    layers = len(step.kv)
    for r in range(rounds):
        order = list(graphs) if r % 2 == 0 else list(reversed(graphs))
        for name in order:
            results[name]["rounds_us"].append(replay_us(graphs[name], layers, rep_ms))
    for name in graphs:
        us = results[name]["rounds_us"]
        results[name].update(median_us=statistics.median(us), min_us=min(us), max_us=max(us))
    del graphs
    return results


# ---------------------------------------------------------------------------
# Sweep: coordinate descent over DecodeConfig
# ---------------------------------------------------------------------------


def _valid(config: DecodeConfig) -> bool:
    return config.min_keys >= config.tile_n and config.min_keys % config.tile_n == 0


def _label(config: DecodeConfig) -> str:
    return (
        f"n{config.tile_n}/k{config.min_keys}/p{config.programs_per_sm}/"
        f"w{config.num_warps}/s{config.num_stages}/c{config.combine_warps}"
    )


def sweep(batch: int, args: argparse.Namespace, log: list[dict]) -> DecodeConfig:
    """Coordinate descent from the planner's choice for ``batch``: each field in turn
    over its values (the others at the best so far), twice over the fields."""
    _, hkv, d = HEADS
    sms = attention_decode.num_multiprocessors(torch.device(DEVICE))
    default = attention_decode.decode_config(max(16, 1 << (d - 1).bit_length()), batch, hkv, sms)
    steps = [make_step(batch, c, args.layers) for c in SWEEP_CONTEXTS]
    best = default
    scores: dict[DecodeConfig, float] = {}

    def score_all(candidates: list[DecodeConfig]) -> None:
        todo = [c for c in candidates if c not in scores]
        if not todo:
            return
        per_step = []
        for step in steps:
            variants = [template_variant(_label(c), step, c) for c in todo]
            per_step.append(time_variants(step, variants, args.sweep_rounds, args.rep_ms))
        for c in todo:
            times = [res[_label(c)].get("median_us") for res in per_step]
            errors = [res[_label(c)].get("max_abs_err") for res in per_step]
            ok = all(t is not None for t in times) and all(
                e is not None and e < 0.05 for e in errors
            )
            found = [float(t) for t in times if t is not None]
            scores[c] = math.exp(statistics.mean(math.log(t) for t in found)) if ok else math.inf
            log.append(
                {
                    "batch": batch,
                    "config": dataclasses.asdict(c),
                    "label": _label(c),
                    "contexts": list(SWEEP_CONTEXTS),
                    "median_us": times,
                    "max_abs_err": errors,
                    "errors": [res[_label(c)].get("error") for res in per_step],
                    "score_us": scores[c],
                }
            )

    for sweep_pass in range(2):
        for field, values in SWEEP_VALUES.items():
            candidates = [dataclasses.replace(best, **{field: v}) for v in values]
            candidates = [c for c in candidates if _valid(c)]
            score_all(candidates)
            best = min([best, *candidates], key=lambda c: scores.get(c, math.inf))
            print(
                f"sweep b{batch} pass {sweep_pass + 1} {field:<15}"
                + " ".join(f"{getattr(c, field)}:{scores[c]:.2f}" for c in candidates)
                + f"  -> {_label(best)} {scores[best]:.2f} us",
                flush=True,
            )
    steps.clear()
    torch.cuda.empty_cache()
    return best


# ---------------------------------------------------------------------------
# Profile: kernel time per layer by kernel
# ---------------------------------------------------------------------------


def profile(step: Step, variant: Variant, replays: int = 5) -> dict[str, float]:
    """Per-layer microseconds by kernel name (CUDA time under the torch profiler)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    graph = capture(step, variant)
    graph.replay()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            name = event.name[:60]
            per_kernel[name] = per_kernel.get(name, 0.0) + event.device_time
    layers = len(step.kv)
    return {k: v / replays / layers for k, v in sorted(per_kernel.items(), key=lambda x: -x[1])}


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def _copy_tbps() -> float:
    import triton.testing

    src = torch.randn((1 << 30) // 2, device=DEVICE, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = min(triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median") for _ in "ab")
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e12


def _driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return None


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def _write(path: Path | None, result: dict, start: float) -> None:
    result["wall_s"] = time.perf_counter() - start
    if path is not None:
        path.write_text(json.dumps(result, indent=1))


def main(argv: list[str] | None = None) -> int:
    global HEADS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stock", type=Path, help="folder with stock's compiled .so files")
    parser.add_argument("--sweep", action="store_true", help="coordinate descent over plans")
    parser.add_argument("--profile", action="store_true", help="kernel time by kernel")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--quick", action="store_true", help="two contexts, fewer rounds")
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the table")
    parser.add_argument("--sweep-rounds", type=int, default=3)
    parser.add_argument("--rep-ms", type=int, default=25, help="do_bench time per figure")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        help="extra template plan NAME=tile_n,min_keys,num_warps,num_stages,programs_per_sm,"
        "combine_warps (DecodeConfig's fields in order)",
    )
    parser.add_argument("--batches", type=_ints, default=BATCHES, help="e.g. 1,8,32")
    parser.add_argument("--contexts", type=_ints, default=None, help="e.g. 256,2048")
    parser.add_argument("--heads", type=_ints, default=HEADS, help="query,KV,head size")
    args = parser.parse_args(argv)
    HEADS = tuple(args.heads)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark", file=sys.stderr)
        return 1
    import triton

    torch.manual_seed(0)
    start = time.perf_counter()
    stock = Stock(args.stock)
    reference_name = "fa3" if stock.fa3 is not None else "sdpa_dense_expanded"
    kv_write_name = "reshape_and_cache_flash" if stock.kv_write is not None else "template KV write"
    print(f"reference: {reference_name}; its KV write: {kv_write_name}")
    for problem in stock.problems:
        print(f"  stock: {problem}")
    copy = _copy_tbps()
    print(f"copy {copy:.2f} TB/s", flush=True)

    configs: dict[str, DecodeConfig | None] = {"template": None, "before": PREVIOUS}
    for spec in args.config:
        name, _, values = spec.partition("=")
        fields = [f.name for f in dataclasses.fields(DecodeConfig)]
        configs[name] = DecodeConfig(**dict(zip(fields, map(int, values.split(",")), strict=True)))
    sweep_log: list[dict] = []
    if args.sweep:
        for batch in args.batches:
            best = sweep(batch, args, sweep_log)
            configs[f"best_b{batch}"] = best
            print(f"sweep b{batch}: best {_label(best)}", flush=True)

    result = {
        "device": torch.cuda.get_device_name(),
        "driver": _driver(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "heads": HEADS,
        "block_size": BLOCK_SIZE,
        "layers": args.layers,
        "reference": reference_name,
        "reference_kv_write": kv_write_name,
        "stock_problems": stock.problems,
        "copy_tbps": copy,
        "configs": {k: v and dataclasses.asdict(v) for k, v in configs.items()},
        "rows": [],
        "sweep": sweep_log,
        "profiles": [],
        "wall_s": None,
    }
    _write(args.json, result, start)
    rows: list[dict] = result["rows"]
    profiles: list[dict] = result["profiles"]
    contexts = args.contexts or ((256, 2048) if args.quick else CONTEXTS)
    for batch in args.batches:
        for context in contexts:
            step = make_step(batch, context, args.layers)
            variants = [template_variant(name, step, c) for name, c in configs.items()]
            try:
                if stock.fa3 is None:
                    raise RuntimeError("stock's FA3 not loaded")
                variants.append(stock.variant("fa3", step))
                variants.append(stock.variant("fa3_attention_only", step, write=False))
                variants.append(stock.variant("stock_kv_write_only", step, attend=False))
            except Exception as exc:  # FA3 missing or refusing this call: SDPA instead
                if stock.fa3 is not None:
                    print(f"FA3 failed ({type(exc).__name__}: {exc}); SDPA instead")
                    stock.problems.append(f"fa3 call: {type(exc).__name__}: {str(exc)[:200]}")
                    stock.fa3 = None
                    result["reference"] = "sdpa_dense_expanded"
                del variants[len(configs) :]
                variants.append(sdpa_variant("sdpa_dense_expanded", step))
            variants.append(template_variant("template_attention_only", step, None, write=False))
            variants.append(template_variant("template_kv_write_only", step, None, attend=False))
            rounds = max(3, args.rounds // 2) if args.quick else args.rounds
            timed = time_variants(step, variants, rounds, args.rep_ms)
            ref = timed.get(variants[len(configs)].name, {}).get("median_us")
            print(f"\nbatch {batch}, context {context}: us per layer, median [range] of {rounds}")
            for name, res in timed.items():
                plan = configs.get(name)
                if name == "template":  # the planner's choice for this shape
                    plan = variants[0].plan
                row = {
                    "batch": batch,
                    "context": context,
                    "variant": name,
                    "plan": None if plan is None else dataclasses.asdict(plan),
                    "kv_tbps": None,
                    "vs_reference": None,
                    **res,
                }
                if "median_us" in res:
                    row["kv_tbps"] = step.kv_bytes / (res["median_us"] * 1e-6) / 1e12
                    if ref:
                        row["vs_reference"] = res["median_us"] / ref
                    err = res["max_abs_err"]
                    print(
                        f"  {name:<26}{res['median_us']:>8.2f} [{res['min_us']:.2f}, "
                        f"{res['max_us']:.2f}]  x{row['vs_reference'] or math.nan:.3f}  "
                        f"KV {row['kv_tbps']:.2f} TB/s  err "
                        + ("-" if err is None else f"{err:.1e}")
                    )
                else:
                    print(f"  {name:<26}{res['error']}")
                rows.append(row)
            if args.profile and context in (256, 2048):
                for variant in variants[: len(configs) + 1]:
                    try:
                        kernels = profile(step, variant)
                    except Exception as exc:
                        kernels = {"error": f"{type(exc).__name__}: {exc}"[:200]}  # type: ignore[dict-item]
                    profiles.append(
                        {"batch": batch, "context": context, "variant": variant.name,
                         "us_per_layer": kernels}
                    )  # fmt: skip
                    print(f"  profile {variant.name}: " + ", ".join(
                        f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in kernels.items()
                    ))  # fmt: skip
            del step, variants
            torch.cuda.empty_cache()
            _write(args.json, result, start)  # a run cut short keeps what it measured
    _write(args.json, result, start)
    print(
        f"\n{result['device']}, driver {result['driver']}, torch {result['torch']}, "
        f"triton {result['triton']}, {result['wall_s']:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

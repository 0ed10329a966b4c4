"""Compile every Triton kernel of ``devices/gpu/kernels`` for a GPU, on a machine without one.

Triton's interpreter (the CPU tests) does not type-check like its compiler: a kernel
can pass every interpreted test and still fail to compile for the device (Triton 3.6
refuses ``tl.dot(int8, int8, int32_acc)`` without ``out_dtype``, 3.8 accepts it). This
runs the kernels' public functions on CPU tensors with Triton's driver replaced by one
that names the target (``cuda``, ``sm_90`` by default) and never launches: each kernel
call goes through Triton's JIT as on the device - its binder derives the same
specialization (dtypes, constexprs, 16-byte alignment and ``== 1`` of each argument) -
and Triton compiles it to a cubin with the ``ptxas`` its wheel carries, then returns
without launching. The cases are the device tests' tables (``kernel_cases.py``) and the
attention layouts an engine warms up; a kernel no case reaches fails the run.

    python tests/devices/gpu/speed_tier/aot_compile.py [--arch 90] [--shard I/N] [--json REPORT]

Prints one JSON report line (``AOT_REPORT {...}``): Triton's version, the target, each
kernel's compiled specializations (hashes) and seconds, the kernels the package launches,
and every failure with its error. Exit 1 on any failure or (unsharded) unreached kernel.
``--shard I/N`` compiles every N-th case: shards run side by side and merge.
``tests/devices/gpu/speed_tier/test_triton_aot_compile.py`` runs two shards in child processes (no
``TRITON_INTERPRET``, a fresh Triton cache) with CI's Triton, and ``tox -e triton-aot``
with the GPU image's (3.6).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
import triton
from kernel_cases import (
    ATTENTION_BATCHES,
    ATTENTION_HEADS,
    BLOCK_SIZES,
    DTYPES,
    ENGINE_ATTENTION_LAYOUTS,
    FORCED_DECODE_SPLITS,
    GELU_APPROXIMATIONS,
    GELU_SHAPES,
    INT8_DTYPES,
    INT8_LINEAR_SHAPES,
    INT8_LINEAR_TOKENS,
    MOE_DTYPES,
    MOE_SHAPES,
    MOE_TOKENS,
    PREFILL_TILES,
    ROTARY_HEADS,
    ROW_SHAPES,
    SILU_SHAPES,
)
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction

REPORT_MARK = "AOT_REPORT "
KERNELS_PACKAGE = "vllm_platform_template.devices.gpu.kernels"
SM90_MULTIPROCESSORS = 132  # the lent sm_90 GPU's; the decode split count depends on it


class CompileOnlyDriver:
    """Triton's active driver for a device that is not here: it names the target and
    device 0 with stream 0; nothing launches (``JITFunction.run`` is held to warm-up)."""

    def __init__(self, target: GPUTarget) -> None:
        self.target = target

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")


@dataclasses.dataclass
class Compiled:
    """What the run compiled: per kernel, the specializations and the seconds spent."""

    specializations: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    failures: list[dict[str, str]] = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def compile_only(target: GPUTarget, compiled: Compiled) -> Iterator[None]:
    """Kernel calls compile for ``target`` and return without launching; the kernels'
    device checks take CPU tensors in place of the device's."""
    kernels = importlib.import_module(KERNELS_PACKAGE)
    attention = importlib.import_module(f"{KERNELS_PACKAGE}.paged_attention")
    run, identity, sms = JITFunction.run, kernels.IDENTITY, attention.num_multiprocessors
    active = driver._active  # None on a machine without a GPU (no driver to go back to)

    def compile_instead_of_launch(
        self: JITFunction, *args: Any, grid: Any, warmup: bool, **kw: Any
    ):
        start = time.perf_counter()
        kernel = run(self, *args, grid=grid, warmup=True, **kw)
        name = self.fn.__name__
        compiled.seconds[name] = compiled.seconds.get(name, 0.0) + time.perf_counter() - start
        compiled.specializations.setdefault(name, set()).add(kernel.hash)
        if "cubin" not in kernel.asm:
            raise RuntimeError(f"{name}: Triton produced no cubin ({sorted(kernel.asm)})")
        return None  # nothing launched: a Launch keeps no compiled kernel to call

    driver.set_active(CompileOnlyDriver(target))
    JITFunction.run = compile_instead_of_launch  # type: ignore[method-assign]
    kernels.IDENTITY = dataclasses.replace(identity, device_type="cpu")
    attention.num_multiprocessors = lambda device: SM90_MULTIPROCESSORS
    try:
        yield
    finally:
        JITFunction.run = run  # type: ignore[method-assign]
        kernels.IDENTITY = identity
        attention.num_multiprocessors = sms
        driver._active = active


def launched_kernels() -> set[str]:
    """Every kernel a module of the package launches (``@triton.jit`` functions named
    ``*_kernel``; the others are device functions the kernels call)."""
    package = importlib.import_module(KERNELS_PACKAGE)
    names = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{KERNELS_PACKAGE}.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, JITFunction) and name.endswith("_kernel"):
                names.add(value.fn.__name__)
    return names


# ---------------------------------------------------------------------------
# The cases: the device tests' tables, then what an engine warms up
# ---------------------------------------------------------------------------


Case = tuple[str, Callable[[], object]]


def _row_ops() -> Iterator[Case]:
    from vllm_platform_template.devices.gpu.kernels import activation, layernorm

    for dtype in DTYPES:
        for shape in ROW_SHAPES:
            x, r = torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
            w = torch.ones(shape[-1], dtype=dtype)
            yield f"rms_norm {shape} {dtype}", partial(layernorm.rms_norm, x, w, 1e-6)
            no_weight = partial(layernorm.rms_norm, x, None, 1e-5, shape[-1] // 2 or 1)
            yield f"rms_norm no weight {shape} {dtype}", no_weight
            fused = partial(layernorm.fused_add_rms_norm_, x, r, w, 1e-6)
            yield f"fused_add_rms_norm_ {shape} {dtype}", fused
        for shape in SILU_SHAPES:
            x = torch.zeros(shape, dtype=dtype)
            yield f"silu_and_mul {shape} {dtype}", partial(activation.silu_and_mul, x)
        for shape in GELU_SHAPES:
            x = torch.zeros(shape, dtype=dtype)
            for approx in GELU_APPROXIMATIONS:
                gelu = partial(activation.gelu_and_mul_sparse, x, 1.6448536, approx)
                yield f"gelu_and_mul_sparse {shape} {approx} {dtype}", gelu
    # Strided rows, a float32 weight on bfloat16 rows, no weight with a variance size.
    x = torch.zeros(64, 3000, dtype=torch.bfloat16)[:, 100:2148]
    r = torch.zeros(64, 2048, dtype=torch.bfloat16)
    yield "rms_norm strided", partial(layernorm.rms_norm, x, torch.ones(2048), 1e-6, 1000)
    yield (
        "fused_add_rms_norm_ strided",
        partial(layernorm.fused_add_rms_norm_, x, r, None, 1e-6, 512),
    )


def _rotary() -> Iterator[Case]:
    from paged_attention_reference import split_kv_cache

    from vllm_platform_template.devices.gpu.kernels import rotary

    tokens = 4096
    positions = torch.zeros(tokens, dtype=torch.int64)
    slots = torch.zeros(tokens - 2, dtype=torch.int64)
    for dtype in DTYPES:
        for hq, hkv, head_size, rot in ROTARY_HEADS:
            cache = torch.zeros(8192, rot, dtype=dtype)
            qkv = torch.zeros(tokens, (hq + 2 * hkv) * head_size, dtype=dtype)
            q, k, v = qkv.split([hq * head_size, hkv * head_size, hkv * head_size], dim=-1)
            kv_cache = split_kv_cache(
                torch.zeros(tokens // 16 + 4, hkv, 16, 2 * head_size, dtype=dtype)
            )
            for neox in (True, False):
                name = f"rotary {(hq, hkv, head_size, rot)} neox={neox} {dtype}"
                yield f"{name} + cache", partial(
                    rotary.rotary_embedding_and_cache_,
                    positions, q, k, v, head_size, cache, neox, *kv_cache, slots,
                )  # fmt: skip
                yield (
                    name,
                    partial(rotary.rotary_embedding_, positions, q, None, head_size, cache, neox),
                )


def _attention() -> Iterator[Case]:
    from paged_attention_reference import split_kv_cache

    from vllm_platform_template.devices.gpu.kernels import kv_write
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa

    for dtype in DTYPES:
        for block_size in BLOCK_SIZES:
            kv_cache = split_kv_cache(torch.zeros(256, 8, block_size, 2 * 128, dtype=dtype))
            key = torch.zeros(3000, 8, 128, dtype=dtype)
            slots = torch.zeros(3000 - 16, dtype=torch.int64)
            write = partial(kv_write.reshape_and_cache_, key, key, *kv_cache, slots)
            yield f"reshape_and_cache_ {block_size} {dtype}", write
            for hq, hkv, head_size in ATTENTION_HEADS:
                for kind, (q_lens, seq_lens) in sorted(ATTENTION_BATCHES.items()):
                    batch = _paged_batch(q_lens, seq_lens, hq, hkv, head_size, block_size, dtype)
                    name = f"paged_attention {kind} {(hq, hkv, head_size)} {block_size} {dtype}"
                    yield name, partial(pa.paged_attention, *batch, max(q_lens))
                    if max(q_lens) == 1:
                        for splits in FORCED_DECODE_SPLITS:
                            forced = partial(pa.paged_attention, *batch, 1, decode_splits=splits)
                            yield f"{name} splits={splits}", forced
    for layout in ENGINE_ATTENTION_LAYOUTS:
        for dtype in DTYPES:
            yield f"engine warm-up {layout} {dtype}", partial(_warm_up, layout, dtype)
    yield from _prefill()


def _prefill() -> Iterator[Case]:
    """The prefill kernel at each tile under trial (bf16), fp32 and fp16 at the first."""
    from vllm_platform_template.devices.gpu.kernels import attention_prefill as prefill

    for tile in PREFILL_TILES:
        for dtype in DTYPES if tile == PREFILL_TILES[0] else (torch.bfloat16,):
            query, kc, vc, out, block_table, lens, qsl, scale = _paged_batch(
                (300, 1), (400, 9), 32, 8, 128, 16, dtype
            )
            # the step's new keys and values: strided views of one [T, 2 * Hkv, D] tensor
            key, value = torch.zeros(query.shape[0], 16, 128, dtype=dtype).split([8, 8], dim=1)
            config = prefill.PrefillConfig(*tile)
            run = partial(
                prefill.prefill_attention_unchecked,
                query, key, value, kc, vc, out, block_table, lens, qsl, scale, config,
            )  # fmt: skip
            yield f"prefill_attention {tile} {dtype}", run


def _paged_batch(
    q_lens: tuple[int, ...],
    seq_lens: tuple[int, ...],
    hq: int,
    hkv: int,
    head_size: int,
    block_size: int,
    dtype: torch.dtype,
) -> tuple[Any, ...]:
    """``paged_attention``'s arguments but ``max_query_len``: zeros of the tests' shapes."""
    from paged_attention_reference import split_kv_cache

    blocks = [(s + block_size - 1) // block_size for s in seq_lens]
    kv = torch.zeros(sum(blocks) + 2, hkv, block_size, 2 * head_size, dtype=dtype)
    kc, vc = split_kv_cache(kv)
    query = torch.zeros(sum(q_lens), hq, head_size, dtype=dtype)
    block_table = torch.zeros(len(seq_lens), max(blocks) + 2, dtype=torch.int32)
    qsl = torch.tensor([0, *q_lens]).cumsum(0).to(torch.int32)
    lens = torch.tensor(seq_lens, dtype=torch.int32)
    return (query, kc, vc, torch.empty_like(query), block_table, lens, qsl, head_size**-0.5)


def _warm_up(layout: tuple[int, int, int, int, int], dtype: torch.dtype) -> None:
    """What an engine's attention backend compiles at start for ``layout``."""
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa
    from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout

    hq, hkv, head_size, block_size, max_reqs = layout
    attention_layout = AttentionLayout(hq, hkv, head_size, dtype, block_size)
    pa.TritonAttentionPlanner(attention_layout, max_reqs, torch.device("cpu")).warm_up()


def _quantized_and_experts() -> Iterator[Case]:
    from vllm_platform_template.devices.gpu.kernels import fused_moe, int8_linear

    for dtype in INT8_DTYPES:
        for k, n in INT8_LINEAR_SHAPES:
            weight = torch.zeros(n, k, dtype=torch.int8)
            scale, bias = torch.ones(n), torch.zeros(n, dtype=dtype)
            for m in INT8_LINEAR_TOKENS:
                x = torch.zeros(m, k, dtype=dtype)
                linear = partial(int8_linear.w8a8_int8_linear, x, weight, scale, bias)
                yield f"w8a8_int8_linear {m}x{k}->{n} {dtype}", linear
    for dtype in MOE_DTYPES:
        for experts, hidden, inter, top_k in MOE_SHAPES:
            w13 = torch.zeros(experts, 2 * inter, hidden, dtype=dtype)
            w2 = torch.zeros(experts, hidden, inter, dtype=dtype)
            q13 = torch.zeros(experts, 2 * inter, hidden, dtype=torch.int8)
            q2 = torch.zeros(experts, hidden, inter, dtype=torch.int8)
            s13, s2 = torch.ones(experts, 2 * inter), torch.ones(experts, hidden)
            for tokens in MOE_TOKENS:
                x = torch.zeros(tokens, hidden, dtype=dtype)
                # Distinct logits per token: the routing spreads the pairs over the experts.
                logits = torch.arange(tokens * experts, dtype=torch.float32).view(tokens, experts)
                logits = logits.remainder(experts * 1.37)
                name = f"{(experts, hidden, inter, top_k)} {tokens} tokens {dtype}"
                fp = partial(fused_moe.fused_moe, x, logits, w13, w2, top_k, True)
                yield f"fused_moe {name}", fp
                int8 = partial(
                    fused_moe.fused_moe_w8a8_int8, x, logits, q13, s13, q2, s2, top_k, True
                )
                yield f"fused_moe_w8a8_int8 {name}", int8


CASE_GROUPS = (_row_ops, _rotary, _attention, _quantized_and_experts)


def compile_all(target: GPUTarget, shard: int = 0, shards: int = 1) -> dict[str, Any]:
    """Every ``shards``-th case from ``shard`` on, compiled for ``target``: the report (see
    the module docstring; each kernel's specializations by hash, so shards merge)."""
    compiled = Compiled()
    cases = 0
    start = time.perf_counter()
    with compile_only(target, compiled):
        for index, (name, call) in enumerate(c for group in CASE_GROUPS for c in group()):
            if index % shards != shard:
                continue
            cases += 1
            try:
                call()
            except Exception as exc:
                compiled.failures.append(
                    {
                        "case": name,
                        "error": f"{type(exc).__name__}: {exc}"[:3000],
                        "traceback": traceback.format_exc()[-3000:],
                    }
                )
    return {
        "triton": triton.__version__,
        "torch": torch.__version__,
        "target": f"{target.backend} sm_{target.arch} (warp {target.warp_size})",
        "cases": cases,
        "seconds": round(time.perf_counter() - start, 1),
        "kernels": {
            name: {"specializations": sorted(keys), "seconds": round(compiled.seconds[name], 1)}
            for name, keys in sorted(compiled.specializations.items())
        },
        "launched": sorted(launched_kernels()),
        "failures": compiled.failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="CUDA compute capability (90: Hopper)")
    parser.add_argument("--shard", default="0/1", help="I/N: every N-th case from the I-th")
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args(argv)
    shard, shards = (int(n) for n in args.shard.split("/"))
    report = compile_all(GPUTarget("cuda", args.arch, 32), shard, shards)
    text = json.dumps(report)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    print(REPORT_MARK + text, flush=True)
    for failure in report["failures"]:
        print(f"FAILED {failure['case']}: {failure['error']}", file=sys.stderr)
    unreached = sorted(set(report["launched"]) - set(report["kernels"])) if shards == 1 else []
    for name in unreached:
        print(f"UNREACHED {name}: no case launches it (kernel_cases.py)", file=sys.stderr)
    return 1 if report["failures"] or unreached else 0


if __name__ == "__main__":
    sys.exit(main())

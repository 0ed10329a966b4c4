"""``vllm-template bench-ops``: time every IR op provider supported on this machine.

For each vLLM IR op, provider, shape and dtype it prints the median time, the
effective bandwidth (bytes read plus written), its share of a copy's bandwidth
measured on the same device, and the speedup against the native op run
eagerly and compiled with ``torch.compile``. The copy is measured on buffers
past the last-level cache (memory bandwidth); a shape whose bytes fit that
cache is marked (``*`` in the table, ``cache_resident`` in JSON): its figure is
the cache's bandwidth and may exceed the copy's. ``--write-priority FILE`` writes
the fastest provider order per op (autotuning over the available
implementations) as JSON for ``--ir-op-priority``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported when the command runs: `--help` starts without it
    import torch

DEFAULT_SHAPES = ((1, 768), (8, 768), (128, 768), (2048, 768), (2048, 4096))
EPS = 1e-5
STD_MULTIPLIER = 1.6448536269514722


@dataclass
class Row:
    op: str
    provider: str
    tokens: int
    hidden: int
    dtype: str
    median_us: float
    gb_per_s: float
    copy_share: float
    vs_native: float
    vs_compiled: float | None
    cache_resident: bool
    """The bytes moved fit the last-level cache: ``gb_per_s`` is the cache's bandwidth."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        help="torch device type to time on (default: the accelerator torch sees, else cpu)",
    )
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument(
        "--shapes", help="comma list of TOKENSxHIDDEN (default: decode to prefill sizes)"
    )
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile baselines")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--write-priority", metavar="FILE", help="write the fastest order per op")
    parser.add_argument(
        "--for-regime",
        choices=("eager", "graph"),
        default="eager",
        help="eager: rank against native; graph: rank against torch.compile'd native",
    )


def _sync(device: str) -> None:
    import torch

    torch.get_device_module(device).synchronize()  # torch.cpu's: returns at once


def median_seconds(fn: Callable[[], Any], reset: Callable[[], None], device: str) -> float:
    """Median over repeated calls, inputs restored (untimed) before each call."""
    for _ in range(5):
        reset()
        fn()
    samples: list[float] = []
    budget = time.perf_counter() + 0.4
    while len(samples) < 15 or (time.perf_counter() < budget and len(samples) < 500):
        reset()
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def last_level_cache_bytes(device: str) -> int | None:
    """Size of the device's last-level cache: the L2 its torch module reports (CUDA's
    ``L2_cache_size``), else cpu0's highest level in sysfs (the host CPU)."""
    import torch

    module = torch.get_device_module(device)
    if hasattr(module, "get_device_properties"):
        l2 = getattr(module.get_device_properties(module.current_device()), "L2_cache_size", None)
        return int(l2) if l2 else None
    levels: dict[int, int] = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        levels[level] = int(size.rstrip("KMG")) * scale
    return levels[max(levels)] if levels else None


def copy_bandwidth(device: str, llc_bytes: int | None) -> float:
    """Bytes per second of a device-to-device copy (read + write) past the last-level cache."""
    import torch

    size = max(64 << 20, 4 * (llc_bytes or 0))
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = median_seconds(lambda: dst.copy_(src), lambda: None, device)
    return 2 * src.numel() / seconds


def make_inputs(op: str, tokens: int, hidden: int, dtype: torch.dtype, device: str) -> tuple:
    import torch

    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype).to(device)

    if op == "rms_norm":
        return (randn(tokens, hidden), randn(hidden), EPS, None)
    if op == "fused_add_rms_norm":
        return (randn(tokens, hidden), randn(tokens, hidden), randn(hidden), EPS, None)
    return (randn(tokens, 2 * hidden), STD_MULTIPLIER, "tanh")


def bytes_moved(op: str, args: tuple) -> int:
    x = args[0]
    size = x.numel() * x.element_size()
    return {"rms_norm": 2 * size, "fused_add_rms_norm": 4 * size}.get(op, size * 3 // 2)


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from vllm.ir.op import IrOp

    from vllm_platform_template_tools.cli.environment import select_device

    select_device(None)  # measure kernels directly; no platform needed
    import vllm_platform_template.ir_impls  # noqa: F401
    from vllm_platform_template.device import device_for

    libraries = None
    if args.device is None:
        accelerator = torch.accelerator.current_accelerator(check_available=True)
        args.device = accelerator.type if accelerator is not None else "cpu"
    template_device = device_for(args.device)
    if template_device is not None and template_device.describe_libraries is not None:
        libraries = template_device.describe_libraries()

    device = args.device
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    shapes = (
        [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        if args.shapes
        else DEFAULT_SHAPES
    )
    llc = last_level_cache_bytes(device)
    copy_bw = copy_bandwidth(device, llc)
    rows: list[Row] = []
    for op_name in ("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"):
        op = IrOp.registry[op_name]
        native = op.impls["native"].impl_fn
        compiled = None if args.no_compile else torch.compile(native, dynamic=True)
        for dtype in dtypes:
            for tokens, hidden in shapes:
                pristine = make_inputs(op_name, tokens, hidden, dtype, device)
                work = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in pristine)

                def reset(work: tuple = work, pristine: tuple = pristine) -> None:
                    for w, p in zip(work, pristine, strict=True):
                        if isinstance(w, torch.Tensor):
                            w.copy_(p)

                t_native = median_seconds(lambda: native(*work), reset, device)  # noqa: B023
                t_compiled = (
                    median_seconds(lambda: compiled(*work), reset, device)  # noqa: B023
                    if compiled is not None
                    else None
                )
                moved = bytes_moved(op_name, pristine)
                for provider, impl in op.impls.items():
                    if not impl.supported or not impl.supports_args(*work):
                        continue
                    t = median_seconds(lambda: impl.impl_fn(*work), reset, device)  # noqa: B023
                    rows.append(
                        Row(
                            op=op_name,
                            provider=provider,
                            tokens=tokens,
                            hidden=hidden,
                            dtype=str(dtype).removeprefix("torch."),
                            median_us=round(t * 1e6, 2),
                            gb_per_s=round(moved / t / 1e9, 2),
                            copy_share=round(moved / t / copy_bw, 3),
                            vs_native=round(t_native / t, 2),
                            vs_compiled=round(t_compiled / t, 2) if t_compiled else None,
                            cache_resident=llc is not None and moved <= llc,
                        )
                    )
    return {
        "device": device,
        "device_name": getattr(
            torch.get_device_module(device), "get_device_name", lambda: device
        )(),
        "threads": torch.get_num_threads(),
        "libraries": libraries,
        "torch": torch.__version__,
        "copy_gb_per_s": round(copy_bw / 1e9, 2),
        "last_level_cache_bytes": llc,
        "rows": [asdict(r) for r in rows],
    }


def fastest_priority(rows: list[dict[str, Any]], regime: str) -> dict[str, list[str]]:
    """Per op, providers that beat the baseline (geometric mean over shapes), fastest first."""
    key = "vs_native" if regime == "eager" else "vs_compiled"
    priority: dict[str, list[str]] = {}
    for op in sorted({r["op"] for r in rows}):
        scores: dict[str, list[float]] = {}
        for r in rows:
            if r["op"] == op and r["provider"] != "native" and r[key]:
                scores.setdefault(r["provider"], []).append(r[key])
        ranked = sorted(
            ((statistics.geometric_mean(v), p) for p, v in scores.items()), reverse=True
        )
        priority[op] = [p for score, p in ranked if score > 1.0] + ["native"]
    return priority


def print_table(result: dict[str, Any]) -> None:
    print(
        f"device {result['device_name']} ({result['threads']} threads), torch {result['torch']}, "
        f"copy bandwidth {result['copy_gb_per_s']} GB/s (read + write)"
    )
    if result.get("libraries"):
        libraries = result["libraries"]
        print(f"{libraries.get('name', 'kernel libraries')}: {libraries}")
    header = f"{'op':<20} {'provider':<16} {'shape':>11} {'dtype':<9} {'us':>9} {'GB/s':>8}"
    print(header + f" {'%copy':>6} {'x native':>9} {'x compiled':>10}")
    for r in result["rows"]:
        compiled = "-" if r["vs_compiled"] is None else f"{r['vs_compiled']:.2f}"
        print(
            f"{r['op']:<20} {r['provider']:<16} {r['tokens']:>5}x{r['hidden']:<5} "
            f"{r['dtype']:<9} {r['median_us']:>9.1f} {r['gb_per_s']:>8.1f} "
            f"{100 * r['copy_share']:>5.1f}%{'*' if r['cache_resident'] else ' '}"
            f"{r['vs_native']:>8.2f} {compiled:>10}"
        )
    if any(r["cache_resident"] for r in result["rows"]):
        llc_mib = result["last_level_cache_bytes"] / (1 << 20)
        print(
            f"* the bytes moved fit the {llc_mib:.0f} MiB last-level cache: the figure is the "
            "cache's bandwidth, not memory's, and may exceed the copy's"
        )


def main(args: argparse.Namespace) -> int:
    result = run_benchmark(args)
    if args.write_priority:
        priority = fastest_priority(result["rows"], args.for_regime)
        with open(args.write_priority, "w") as f:
            json.dump(priority, f, indent=2)
        result["priority"] = priority
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
        if args.write_priority:
            print(f"priority ({args.for_regime}) written to {args.write_priority}: {priority}")
    return 0

"""Per-step wall time of a 16-layer toy decoder: eager vs piecewise CUDA graphs.

The template's ``cuda`` graph backend captures each piece between attention
calls (attention eager), as vLLM's piecewise mode does. Reports the mean step
time at batch 1..8 and the eager/graph ratio; outputs are checked equal::

    python benchmarks/gpu_graphs.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "devices" / "gpu" / "speed_tier")]

from toy_decoder import PiecewiseGraphs, ToyConfig, ToyDecoder  # noqa: E402

from vllm_platform_template.devices.gpu.graphs import DeviceGraphBackend  # noqa: E402


def step_ms(fn, x: torch.Tensor, steps: int = 200) -> float:
    for _ in range(20):
        fn(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        fn(x)
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    config = ToyConfig()
    model = ToyDecoder(config)
    graphs = PiecewiseGraphs(model, DeviceGraphBackend(torch.cuda.graph_pool_handle()))
    start = time.perf_counter()
    for batch in range(8, 0, -1):
        graphs.capture(batch)
    capture_s = time.perf_counter() - start
    rows = []
    for batch in range(1, 9):
        x = torch.randn(batch, config.hidden, dtype=config.dtype, device="cuda")
        equal = torch.equal(graphs.step(x).clone(), model.eager_step(x))
        eager = step_ms(model.eager_step, x)
        graph = step_ms(graphs.step, x)
        rows.append(
            {
                "batch": batch,
                "eager_ms": round(eager, 3),
                "graph_ms": round(graph, 3),
                "speedup": round(eager / graph, 2),
                "outputs_equal": equal,
            }
        )
    print(
        f"device {torch.cuda.get_device_name()}, torch {torch.__version__}; "
        f"{config.layers} layers, hidden {config.hidden}, {config.layers + 1} pieces, "
        f"captured 8 sizes in {capture_s:.2f} s"
    )
    print(f"{'batch':>5} {'eager ms':>9} {'graph ms':>9} {'speedup':>8} equal")
    for r in rows:
        print(
            f"{r['batch']:>5} {r['eager_ms']:>9.3f} {r['graph_ms']:>9.3f} {r['speedup']:>8.2f} "
            f"{r['outputs_equal']}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "rows": rows,
                    "capture_s": capture_s,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()

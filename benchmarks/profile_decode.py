"""Where a decode step's time goes, stock vLLM CPU against the template platform.

Runs each variant's engine under py-spy (sampling every process; only the
worker's ``execute_model``/``sample_tokens`` stacks are counted), decodes
batch-1 requests, and prints the share of each part of a step::

    python benchmarks/profile_decode.py --size small [--variants stock,template-graph]

Needs ``py-spy`` beside the Python running it (``pip install py-spy``; not in
the ``dev`` extra). Sampling slows both variants alike;
read shares, not speeds, from it.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import EngineProbe, machine

PARTS = {
    "compiled model code (GEMMs, norms, activations)": (),
    "attention and KV-cache write": (
        "unified_attention",
        "unified_kv_cache_update",
        "attention/impl.py",
        "cpu_attn",
    ),
    "piecewise dispatch, compiled-graph runtime wrappers": (
        "piecewise_backend",
        "standalone_compile",
        "runtime_wrappers",
        "graph_wrapper",
        "compilation/caching.py",
    ),
    "LM head (compute_logits)": ("compute_logits",),
    "input preparation (states, slot mapping, metadata)": (
        "_prepare_inputs",
        "_update_states",
        "_build_attention_metadata",
        "_get_slot_mappings",
        "_determine_batch",
        "_preprocess",
    ),
    "sampling and bookkeeping": ("sample_tokens", "_sample", "_bookkeeping"),
}


def classify(stack: str) -> str:
    """The part of a decode step one sampled worker stack belongs to."""
    names = list(PARTS)
    if "_model_forward" in stack:
        if any(key in stack for key in PARTS[names[1]]):
            return names[1]
        if "Runner.call" in stack:  # Inductor's generated code
            return names[0]
        if any(key in stack for key in PARTS[names[2]]):
            return names[2]
        return "model forward, other Python"
    for name in names[3:]:
        if any(key in stack for key in PARTS[name]):
            return name
    return "other"


def shares(raw: Path) -> tuple[dict[str, float], int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or "worker_busy_loop" not in stack:
            continue
        if "execute_model" in stack or "sample_tokens" in stack:
            counts[classify(stack)] += int(count)
    total = sum(counts.values()) or 1
    return {part: 100 * n / total for part, n in counts.items()}, total


def child(variant: str, size: str, requests: int, tokens: int) -> None:
    probe = EngineProbe({"variant": variant, "size": size})
    try:
        for seed in range(requests):
            probe.ask(op="decode", batch=1, tokens=tokens, seed=seed)
    finally:
        probe.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="small", choices=("tiny", "small"))
    parser.add_argument("--variants", default="stock,template-graph")
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.size, args.requests, args.tokens)
        return
    py_spy = Path(sys.executable).with_name("py-spy")
    table: dict[str, tuple[dict[str, float], int]] = {}
    for variant in args.variants.split(","):
        raw = Path(tempfile.mkdtemp(prefix="decode-profile-")) / f"{variant}.raw"
        command = [sys.executable, __file__, "--child", variant, "--size", args.size]
        command += ["--requests", str(args.requests), "--tokens", str(args.tokens)]
        record = [str(py_spy), "record", "--subprocesses", "-r", "100", "--format", "raw"]
        subprocess.run(
            [*record, "-o", str(raw), "--", *command],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        table[variant] = shares(raw)
    parts = [*PARTS, "model forward, other Python", "other"]
    print(f"machine: {machine()}; model {args.size}; batch 1, {args.tokens} tokens/request\n")
    print("| part of a decode step | " + " | ".join(table) + " |")
    print("|---|" + "---:|" * len(table))
    for part in parts:
        cells = " | ".join(f"{share.get(part, 0):.1f}%" for share, _ in table.values())
        print(f"| {part} | {cells} |")
    print("| worker samples | " + " | ".join(str(n) for _, n in table.values()) + " |")


if __name__ == "__main__":
    main()

"""Shared helpers of the benchmark scripts: run probes in fresh processes, print tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROBE = Path(__file__).with_name("_engine_probe.py")


def run_probe(spec: dict[str, Any], cache_root: str | None = None, timeout: int = 1800) -> dict:
    """One engine start in a fresh process (own VLLM_CACHE_ROOT unless given)."""
    env = dict(os.environ)
    env.pop("VLLM_TEMPLATE_DEVICE", None)
    root = cache_root or tempfile.mkdtemp(prefix="vllm-bench-")
    env["VLLM_CACHE_ROOT"] = root
    proc = subprocess.run(
        [sys.executable, str(PROBE), json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"probe {spec} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine() -> str:
    import platform

    import torch

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {platform.python_version()}"


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row.get(c, "-")).ljust(widths[c]) for c in columns))

"""One demo engine in this process, and what the device counted while it ran.

``python tests/devices/gpu/device_probe.py [demo options]`` runs ``vllm-template demo
--json`` with vLLM's engine core and its worker in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and prints the demo's report with one key
more, ``device_dispatch``: the operators the device ran, by name, counted by the
device itself. The PrivateUse1 test device (``tests/test_device``) counts every
operator dispatched to it; a device that counts nothing reports ``null``. The
device tests run it in a child process with :func:`run_in_child`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def device_dispatch_counts() -> dict[str, int] | None:
    """The test device's per-operator counts in this process (None on any other device)."""
    import torch

    if not hasattr(torch.ops.npu_test, "dispatch_counts"):  # not the test device
        return None
    names, counts = torch.ops.npu_test.dispatch_counts()
    return dict(zip(names, counts, strict=True))


def run_in_child(cache_root: Path, *args: str, env: Mapping[str, str] | None = None) -> dict:
    """This probe with demo options ``args`` in a child process (the plugin's device setting
    left to ``--device``, vLLM's cache under ``cache_root``, ``env`` added): its report,
    with its log under ``"_stderr"``."""
    from vllm_platform_template.settings import DEVICE_ENV

    child = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    child |= {"VLLM_CACHE_ROOT": str(cache_root), **(env or {})}
    proc = subprocess.run(
        [sys.executable, __file__, *args], env=child, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["_stderr"] = proc.stderr
    return report


def main(argv: list[str]) -> int:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the worker runs in this process
    from vllm_platform_template_tools.cli import demo
    from vllm_platform_template_tools.cli.main import build_parser

    args = build_parser("demo").parse_args(["demo", "--json", *argv])
    report: dict[str, Any] = demo.run(args)
    report["device_dispatch"] = device_dispatch_counts()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

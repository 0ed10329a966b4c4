"""One demo engine in this process, and what the device counted while it ran.

``python tests/devices/gpu/device_probe.py [demo options]`` runs ``vllm-template demo
--json`` with vLLM's engine core and its worker in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and prints the demo's report with one key
more, ``device_dispatch``: the operators the device ran, by name, counted by the
device itself. The PrivateUse1 test device (``tests/test_device``) counts every
operator dispatched to it; a device that counts nothing reports ``null``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def device_dispatch_counts() -> dict[str, int] | None:
    """The test device's per-operator counts in this process (None on any other device)."""
    import torch

    if not hasattr(torch.ops.npu_test, "dispatch_counts"):  # not the test device
        return None
    names, counts = torch.ops.npu_test.dispatch_counts()
    return dict(zip(names, counts, strict=True))


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

"""Run the demo in one process with a fault injected into the template platform.

The engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: engine core
and worker live in this process), so a fault patched here reaches the
compiler, the graph wrapper or the kernels. Usage::

    python tests/full_plugin/fault_runner.py FAULT [demo arguments...]

Prints the demo's JSON report (or a JSON error object) as the last line.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any
from unittest import mock


def _compile_stage_fault() -> mock._patch:
    from vllm_platform_template.compiler.compiler import TemplateCompiler

    def fail(self, *args, **kwargs):
        raise RuntimeError("injected compile-stage fault")

    return mock.patch.object(TemplateCompiler, "_compile_graph", fail)


def _capture_fault() -> mock._patch:
    from vllm_platform_template.device import device_for

    device = device_for(os.environ["VLLM_TEMPLATE_DEVICE"])
    assert device is not None
    backend = type(device.graph_backend(None))  # the device's graph backend class

    original = backend.capture

    def fail_for_size_4(self, fn):
        from vllm.forward_context import get_forward_context

        if get_forward_context().batch_descriptor.num_tokens == 4:
            raise RuntimeError("injected graph-capture fault")
        return original(self, fn)

    return mock.patch.object(backend, "capture", fail_for_size_4)


def _provider_fault() -> mock._patch:
    from vllm_platform_template.devices.cpu import kernels as cpu

    def fail(*args, **kwargs):
        raise RuntimeError("injected provider fault in template_cpu fused_add_rms_norm")

    # The CPU device's kernel table is built on first use, after this patch.
    return mock.patch.object(cpu, "fused_add_rms_norm_", fail)


FAULTS = {
    "compile_stage": _compile_stage_fault,
    "capture": _capture_fault,
    "provider": _provider_fault,
    "none": None,
}


def run_with_fault(
    engine_runs: Any, fault: str, *args: str, cache_root: Path | None = None
) -> dict:
    """One in-process engine run with ``fault`` injected: this script, through the session's
    ``engine_runs`` (memoised like every engine run)."""
    return engine_runs.run_script(Path(__file__), fault, *args, cache_root=cache_root)


def main() -> int:
    fault, demo_args = sys.argv[1], sys.argv[2:]
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    # Before anything imports vLLM (the fault patches do): vLLM resolves the
    # platform once per process, at the first use.
    device_args = [a for flag, a in itertools.pairwise(demo_args) if flag == "--device"]
    os.environ["VLLM_TEMPLATE_DEVICE"] = device_args[-1] if device_args else "cpu"
    import argparse

    from vllm_platform_template_tools.cli.demo import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--json", *demo_args])
    factory = FAULTS[fault]
    try:
        if factory is None:
            report = run(args)
        else:
            with factory():
                report = run(args)
    except Exception as e:
        print(
            json.dumps({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        )
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

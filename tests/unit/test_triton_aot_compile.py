"""Every Triton kernel of the GPU folder compiles for Hopper (sm_90), here, without a GPU.

``tests/gpu/aot_compile.py`` runs in a child process (Triton reads ``TRITON_INTERPRET``
when a kernel module is imported, and the interpreter tests' child sets it; a fresh
Triton cache, so every case compiles). CI runs this file with its own Triton and again
with the GPU image's in ``tox -e triton-aot``. The int8 grouped GEMM of the INT8
experts, which passed every interpreted test, failed here under Triton 3.6 (``tl.dot``
of int8 operands into an int32 accumulator without ``out_dtype``) - as it failed on the
lent GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNNER = REPO_ROOT / "tests" / "gpu" / "aot_compile.py"
REPORT_MARK = "AOT_REPORT "
TIMEOUT_S = 900


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton-cache"))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), str(REPO_ROOT / "tests"), env.get("PYTHONPATH")) if p
    )
    proc = subprocess.run(
        [sys.executable, str(RUNNER), "--arch", "90"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith(REPORT_MARK):
            return json.loads(line[len(REPORT_MARK) :])
    pytest.fail(
        f"{RUNNER.name} exited {proc.returncode} without a report\n"
        f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    )


def test_every_case_compiles_for_sm90(report: dict) -> None:
    print(
        f"Triton {report['triton']} -> {report['target']}: {report['cases']} cases in "
        f"{report['seconds']} s; "
        + ", ".join(f"{k} {v['specializations']}" for k, v in report["kernels"].items())
    )
    failures = "\n\n".join(
        f"{f['case']}: {f['error']}\n{f['traceback']}" for f in report["failures"][:5]
    )
    assert not report["failures"], (
        f"{len(report['failures'])} of {report['cases']} cases did not compile for "
        f"{report['target']} with Triton {report['triton']}:\n{failures}"
    )


def test_every_kernel_is_reached(report: dict) -> None:
    """A kernel no case launches would never be checked: each has compiled at least once,
    at more than one specialization where the cases vary its dtype."""
    assert not report["unreached"], f"no case compiles {report['unreached']}"
    assert len(report["kernels"]) >= 11
    for name, compiled in report["kernels"].items():
        assert compiled["specializations"] >= 3, (name, compiled)

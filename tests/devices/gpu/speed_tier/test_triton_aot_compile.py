"""Every Triton kernel of the GPU folder compiles for Hopper (sm_90), here, without a GPU.

``tests/devices/gpu/speed_tier/aot_compile.py`` runs in a child process (Triton reads
``TRITON_INTERPRET``
when a kernel module is imported, and the interpreter tests' child sets it; a fresh
Triton cache, so every case compiles). It compiles in ``tox -e triton-aot``, with the
GPU image's Triton, which the kernels meet on the GPU, and is skipped elsewhere: in the
test env (CI's newer Triton) it repeated that env's work at twice its time (219 s of setup
on a slower CI host) and decided nothing the GPU runs. The int8 grouped GEMM of the INT8
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

REPO_ROOT = Path(__file__).resolve().parents[4]
# the package and the test helpers, for the child process
HELPER_PATHS = (str(REPO_ROOT), str(REPO_ROOT / "tests"), str(REPO_ROOT / "tests" / "full_plugin"))
RUNNER = Path(__file__).with_name("aot_compile.py")
REPORT_MARK = "AOT_REPORT "
TIMEOUT_S = 900


SHARDS = 2  # child processes side by side: compiling is CPU-bound, one core each
# tox.ini's triton-aot env sets it: its Triton is the GPU image's
AOT_ENV = "TEMPLATE_TRITON_AOT"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The shards' reports merged: cases, failures, specializations (by hash), seconds."""
    if not os.environ.get(AOT_ENV):
        pytest.skip(f"compiled by tox -e triton-aot (the GPU image's Triton; {AOT_ENV} unset)")
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton-cache"))
    env["PYTHONPATH"] = os.pathsep.join(
        p
        for p in (
            str(REPO_ROOT),
            str(REPO_ROOT / "tests"),
            str(REPO_ROOT / "tests" / "full_plugin"),
            env.get("PYTHONPATH"),
        )
        if p
    )
    children = [
        subprocess.Popen(
            [sys.executable, str(RUNNER), "--arch", "90", "--shard", f"{i}/{SHARDS}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(SHARDS)
    ]
    reports = []
    for child in children:
        out, err = child.communicate(timeout=TIMEOUT_S)
        lines = [line for line in out.splitlines() if line.startswith(REPORT_MARK)]
        if not lines:
            pytest.fail(
                f"{RUNNER.name} exited {child.returncode} without a report\n"
                f"stdout:\n{out[-4000:]}\nstderr:\n{err[-6000:]}"
            )
        reports.append(json.loads(lines[-1][len(REPORT_MARK) :]))
    merged = dict(reports[0], cases=0, failures=[], kernels={})
    for shard in reports:
        merged["cases"] += shard["cases"]
        merged["failures"] += shard["failures"]
        merged["seconds"] = max(merged["seconds"], shard["seconds"])
        for name, compiled in shard["kernels"].items():
            keys = merged["kernels"].setdefault(name, {"specializations": set(), "seconds": 0.0})
            keys["specializations"] |= set(compiled["specializations"])
            keys["seconds"] += compiled["seconds"]
    merged["unreached"] = sorted(set(merged["launched"]) - set(merged["kernels"]))
    return merged


def test_every_case_compiles_for_sm90(report: dict) -> None:
    print(
        f"Triton {report['triton']} -> {report['target']}: {report['cases']} cases in "
        f"{report['seconds']} s; "
        + ", ".join(f"{k} {len(v['specializations'])}" for k, v in report["kernels"].items())
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
        assert len(compiled["specializations"]) >= 3, (name, compiled)

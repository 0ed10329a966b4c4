"""An embedding script exits cleanly on the template platform, every time.

vLLM 0.32's sync client leaves its output thread to end on its own at interpreter exit;
when it frees its last outputs (a pooling output is a torch tensor) while the
interpreter finalizes, the process aborts after a correct answer ("terminate called
without an active exception", SIGABRT) - the patch registry's
``client_threads_end_before_the_interpreter``. ``pooling_exit_runner.py`` is the script
a user writes (no cleanup), run with its output thread waking late from the stop signal
(``--late-output-thread``), as on a host too busy to schedule it: the race, lost only
sometimes by itself, is then certain. ``RUNS`` runs on the template platform and one on
stock vLLM CPU start side by side. Each template run must exit 0 with vLLM's output
thread ended before finalization (the patch's path, which an exit status alone can hide).
Stock is the reference that the patch is still needed: its output thread is still alive
at finalization (where it aborts, if it is freeing tensors then); when it is not, vLLM
waits for it and the patch can go (its ``remove_when``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from engine_exit import STOCK_EXIT_ABORT

from vllm_platform_template.platform_hooks.activation import DEVICE_ENV

pytestmark = pytest.mark.e2e

RUNNER = Path(__file__).with_name("pooling_exit_runner.py")
RUNS = int(os.environ.get("ENGINE_EXIT_RUNS", "2"))
# pooling_exit_runner.py's names (a script, not a module the tests import)
EXIT_LINE = "output threads alive as the interpreter finalizes:"
OUTPUT_THREAD = "EngineCoreOutputQueueThread"
TIMEOUT_S = 900


def _start(device: str, cache: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env["VLLM_CACHE_ROOT"] = str(cache)
    return subprocess.Popen([sys.executable, str(RUNNER), device, "--late-output-thread"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _outcome(proc: subprocess.Popen) -> dict:
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    lines = stdout.strip().splitlines()
    alive = [json.loads(line.split(EXIT_LINE, 1)[1]) for line in stderr.splitlines()
             if EXIT_LINE in line]  # fmt: skip
    return {"returncode": proc.returncode, "report": json.loads(lines[-1]) if lines else None,
            "alive_at_finalization": alive[0] if alive else None, "stderr": stderr}  # fmt: skip


@pytest.fixture(scope="module")
def exits(engine_runs) -> dict[str, list[dict]]:
    procs = {"cpu": [_start("cpu", engine_runs.cache_root) for _ in range(RUNS)],
             "stock": [_start("stock", engine_runs.cache_root)]}  # fmt: skip
    return {device: [_outcome(p) for p in group] for device, group in procs.items()}


def test_an_embedding_script_exits_cleanly_on_the_template_platform(exits) -> None:
    for i, run in enumerate(exits["cpu"]):
        where = f"template run {i + 1} of {RUNS}:\n{run['stderr'][-4000:]}"
        assert run["report"] == {"platform": "TemplateCpuPlatform", "embeddings": 64}, where
        assert run["returncode"] == 0, where
        # the patch's path: vLLM's output thread had ended before the interpreter finalized
        assert run["alive_at_finalization"] == [], where


def test_stock_vllm_leaves_its_output_thread_to_the_finalizing_interpreter(exits) -> None:
    (run,) = exits["stock"]
    where = run["stderr"][-4000:]
    assert run["report"] == {"platform": "CpuPlatform", "embeddings": 64}, where
    aborted = run["returncode"] == -signal.SIGABRT and STOCK_EXIT_ABORT in where
    assert run["returncode"] == 0 or aborted, where
    assert run["alive_at_finalization"] == [OUTPUT_THREAD], (
        "stock vLLM's output thread ended before finalization: vLLM may now wait for it "
        "(patch client_threads_end_before_the_interpreter's remove_when)\n" + where
    )

"""The patch registry's claim: no module outside it rebinds vLLM or torch objects."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from vllm_platform_template.patches import PATCHES
from vllm_platform_template.settings import DEVICE_ENV

PACKAGE = Path(__file__).resolve().parents[2] / "vllm_platform_template"
# mock.patch / patch.object, MethodType rebinding, assignment to a vllm/torch module attribute
# (torch's own ``<config>.patch(...)`` API for config values is not a rebinding)
REBINDING = re.compile(
    r"unittest\.mock|(?<![\w.])patch\(|patch\.object|types\.MethodType|"
    r"^\s*(?:vllm|torch)\.[\w.]+\s*=[^=]",
    re.MULTILINE,
)


def test_no_rebinding_outside_the_registry() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "patches.py" or "tests" in path.parts:
            continue
        for match in REBINDING.finditer(path.read_text()):
            offenders.append(f"{path.relative_to(PACKAGE)}: {match.group(0).strip()}")
    assert offenders == [], offenders


def test_every_entry_documents_itself() -> None:
    for patch in PATCHES:
        assert patch.why and patch.upstream and patch.remove_when, patch.name
        assert (patch.scope == "process") == (patch.apply is not None), patch.name
        assert patch.scope in ("process", "call") and (patch.scope == "process" or patch.caller)


# [full only] the CPU reference backend
def test_cleanup_runs_where_the_template_cpu_platform_is_current() -> None:
    """vLLM's cleanup_dist_env_and_memory, called as its test harness calls it after each
    test (no engine built, so no general plugin loaded), finishes on the CPU platform."""
    code = (
        "from vllm.distributed import cleanup_dist_env_and_memory\n"
        "from vllm.platforms import current_platform\n"
        "assert not current_platform.is_cpu(), current_platform\n"
        "cleanup_dist_env_and_memory()\n"
    )
    env = {**os.environ, DEVICE_ENV: "cpu"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]


# [/full only]


def test_a_process_another_thread_reaped_is_not_alive_to_vllms_shutdown() -> None:
    """vLLM's liveness monitor may reap the engine first; multiprocessing then says 'alive'."""
    import multiprocessing
    import os
    import time

    from vllm_platform_template.patches import ReapedAwareProcess

    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
    process.start()
    os.waitpid(process.pid, 0)  # the other thread's reap
    assert process.is_alive()  # multiprocessing's answer: ECHILD read as "not exited"
    assert not ReapedAwareProcess(process).is_alive()
    assert ReapedAwareProcess(process).name == process.name  # everything else delegated
    running = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    running.start()
    try:
        assert ReapedAwareProcess(running).is_alive()
    finally:
        running.kill()
        running.join()

"""The CPU reference backend's process patches (``devices/cpu/patches.py``) at work."""

from __future__ import annotations

import os
import subprocess
import sys

from vllm_platform_template.settings import DEVICE_ENV


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

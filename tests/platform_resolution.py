"""Resolving vLLM's platform in a fresh process, with this plugin and a second one installed.

Shared by the activation tests of every folder (``tests/shared/test_entry_point.py``, the CPU
backend's ``test_cpu_entry_point.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys

from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
)


def resolve_platform_in_subprocess(env_overrides: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env.update(env_overrides)
    code = (
        "from vllm.platforms import current_platform as p; "
        "print(type(p).__module__ + '.' + type(p).__qualname__)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def second_plugin(tmp_path) -> dict[str, str]:
    """A second out-of-tree platform plugin, installed through a dist-info on PYTHONPATH."""
    (tmp_path / "other_platform_plugin.py").write_text(
        "def register():\n    return 'vllm.platforms.cpu.CpuPlatform'\n"
    )
    info = tmp_path / "other_platform_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: other-platform-plugin\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[vllm.platform_plugins]\nother = other_platform_plugin:register\n"
    )
    return {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}

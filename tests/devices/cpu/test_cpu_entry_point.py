"""The CPU reference backend through the platform entry point, and vLLM resolving it among plugins.

Proves that ``VLLM_TEMPLATE_DEVICE=cpu`` (any case) selects the template's CPU
platform, that vLLM resolves that platform when it loads the plugins, that
vLLM refuses two active out-of-tree platform plugins, and that
``VLLM_PLUGINS=template`` selects this one among several.
"""

from __future__ import annotations

from platform_resolution import resolve_platform_in_subprocess, second_plugin

from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
    PLATFORM_QUALNAMES,
    select_platform,
)


def test_cpu_selects_cpu_platform() -> None:
    selection = select_platform({DEVICE_ENV: "CPU"})
    assert selection.problem is None
    assert selection.qualname == PLATFORM_QUALNAMES["cpu"]


def test_vllm_resolves_template_platform() -> None:
    result = resolve_platform_in_subprocess({DEVICE_ENV: "cpu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(PLATFORM_QUALNAMES["cpu"])


def test_two_active_oot_plugins_are_rejected_by_vllm(tmp_path) -> None:
    env = second_plugin(tmp_path)
    result = resolve_platform_in_subprocess({**env, DEVICE_ENV: "cpu"})
    assert result.returncode != 0
    assert "Only one platform plugin can be activated" in result.stderr


def test_vllm_plugins_selects_the_template_among_several(tmp_path) -> None:
    env = second_plugin(tmp_path)
    result = resolve_platform_in_subprocess({**env, DEVICE_ENV: "cpu", "VLLM_PLUGINS": "template"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(PLATFORM_QUALNAMES["cpu"])

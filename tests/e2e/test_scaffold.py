"""``vllm-template new``: the generated plugins install and pass their own checks on the CPU.

Both variants are generated: the default (its device folder for CUDA) and
``--device npu`` (the same folder, identity table set to ``npu``). Each is
installed (editable, no dependencies) into a virtualenv that sees this
environment's packages through a ``.pth`` file, so vLLM is not installed
twice, and runs its own lint (ruff) and type check (mypy). The default runs
its whole unit tier and one engine parity run of its own e2e tier on its CPU
backend (tiny fp32 greedy tokens equal to transformers'); the npu variant
differs from it only in its device folder's names and identity table, so it
runs the unit tests of that folder and of activation, and vLLM's own platform
resolution shows the user its list of missing hooks. Independent steps of the
two variants run side by side (the machine has few cores; mypy is one thread).
On a machine with the device (GPU tier), the default project's own device-tier
parity tests run too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Sequence
from pathlib import Path

import pytest

from vllm_platform_template.cli.new import generate
from vllm_platform_template.devices.gpu.availability import HOOKS
from vllm_platform_template.devices.gpu.identity import IDENTITY

pytestmark = pytest.mark.e2e

DEVICES = ("cuda", "npu")
RUFF = Path(sys.executable).parent / "ruff"
# The unit tests of the npu variant's device folder, its activation and layering (vLLM's
# own resolution of its platform is test_vllm_shows_the_port_its_missing_hooks).
PORT_UNIT_TESTS = (
    "tests/unit/test_device_identity.py",
    "tests/unit/test_gpu_platform.py",
    "tests/unit/test_activation.py::test_missing_device_says_what_was_found",
    "tests/unit/test_import_graph.py",
    "tests/unit/test_policy.py",
    "tests/unit/test_communicator_graph_capture.py",
    "tests/unit/test_attention_backend.py",
)


class Project:
    """A generated plugin installed into its own virtualenv."""

    def __init__(self, root: Path, python: Path) -> None:
        self.root, self.python = root, python

    def start(self, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [str(a) for a in args],
            cwd=self.root,
            env={**_clean_env(), "VLLM_CACHE_ROOT": str(self.root / ".cache"), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TEMPLATE", "PYTEST"))}


def _install(project: Path, env_dir: Path) -> Path:
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    Path(site, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "-e", str(project)],
        check=True, timeout=600, env=_clean_env(),
    )  # fmt: skip
    return python


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Project]:
    root = tmp_path_factory.mktemp("scaffold")
    made = {}
    for device in DEVICES:
        project = generate("acme", root / device / "vllm-acme", device)
        made[device] = Project(project, _install(project, root / device / "venv"))
    return made


def _finish(runs: Sequence[tuple[str, subprocess.Popen]], timeout: int) -> None:
    """Wait for every run; fail with the output of each one that failed."""
    failures = []
    for label, proc in runs:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            failures.append(f"--- {label}: timed out after {timeout} s\n{output[-3000:]}")
            continue
        if proc.returncode != 0:
            failures.append(f"--- {label}: exit {proc.returncode}\n{output[-6000:]}")
    assert not failures, "\n".join(failures)


def test_generated_projects_pass_their_lint_and_type_check(projects) -> None:
    lint = [
        (f"ruff {device}", project.start(RUFF, *args))
        for device, project in projects.items()
        for args in (("check", "."), ("format", "--check", "."))
    ]
    _finish(lint, timeout=300)
    types = [(f"mypy {d}", p.start(p.python, "-m", "mypy")) for d, p in projects.items()]
    _finish(types, timeout=900)


def test_generated_projects_pass_their_unit_tests(projects) -> None:
    pytest_args = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not e2e and not gpu")
    default, port = projects["cuda"], projects["npu"]
    _finish(
        [
            ("unit tier (default)", default.start(default.python, *pytest_args, "tests/unit",
                                                  "vllm_acme/models")),
            ("device folder unit tests (npu)", port.start(port.python, *pytest_args,
                                                          *PORT_UNIT_TESTS)),
        ],
        timeout=1200,
    )  # fmt: skip


def test_generated_project_matches_transformers_on_its_cpu_backend(projects) -> None:
    """The default project's own e2e parity test: one eager engine on its CPU platform."""
    project = projects["cuda"]
    test = "tests/e2e/test_parity.py::test_matches_transformers[eager]"
    run = project.start(project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", test)
    _finish([("engine parity (default)", run)], timeout=900)


def test_vllm_shows_the_port_its_missing_hooks(projects) -> None:
    """vLLM resolving the platform with ``VLLM_ACME_DEVICE=npu``: the whole to-do list."""
    project = projects["npu"]
    code = "from vllm.platforms import current_platform; current_platform.device_type"
    proc = project.start(project.python, "-c", code, env={"VLLM_ACME_DEVICE": "npu"})
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "AcmeActivationError" in output and "sees no npu device" in output, output[-3000:]
    for hook in HOOKS:
        assert f"names no {hook.field} for npu; see docs/porting-guide.md, {hook.section!r}" in (
            output
        ), hook.name


@pytest.mark.gpu
@pytest.mark.timeout(900)  # generation, installs and two engine starts (GPU tier: 420 s a test)
@pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {IDENTITY.device_type} device")
def test_generated_device_folder_matches_transformers_on_the_device(projects) -> None:
    """GPU tier: the default project's own device-tier parity, eager and with its graphs."""
    project = projects["cuda"]
    tests = "test_eager_matches_transformers_on_gpu_and_cpu or test_default_graphs_capture_replay"
    run = project.start(
        project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
        "tests/e2e/test_gpu_engine.py", "-k", tests,
    )  # fmt: skip
    _finish([("device-tier parity (default)", run)], timeout=900)

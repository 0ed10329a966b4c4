"""``vllm-template new``: the generated plugins install and pass their own checks on the CPU.

Both shapes are generated: the full plugin (``new acme``: its device folder for
CUDA and the CPU reference backend) and the first-light plugin (``new acme
--device npu``: the folder's first-light tier, identity table set to ``npu``).
Each is installed (editable, no dependencies) into a virtualenv that sees this
environment's packages through a ``.pth`` file, so vLLM is not installed
twice, and runs its own lint (ruff); the first-light one also its type check
(mypy), its whole unit tier and its own first-light tests on the PrivateUse1 test device
(``tests/test_device``: eager engines through the device folder on one and two
test devices, tokens equal to transformers'); the full one one engine parity
run of its e2e tier on its CPU backend, and its type check and whole unit tier
where ``SCAFFOLD_FULL=1`` (``tox -e scaffold``: they are this project's own, renamed,
about four CPU-minutes CI does not spend twice); and vLLM's own platform resolution
shows the first-light one's user that no npu device is there without the test
device. Independent steps of the two run side by side (the machine has few
cores; mypy is one thread). On a machine with the device (GPU tier), the full
project's own device-tier parity tests run too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Sequence
from pathlib import Path

import pytest
from hf_reference import decoding_of

from vllm_platform_template.devices.gpu.availability import FIRST_LIGHT, HOOKS
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template_tools.cli.new import generate, port_identity

pytestmark = pytest.mark.e2e

DEVICES = ("cuda", "npu")
FULL_ENV = "SCAFFOLD_FULL"  # 1: the full plugin's whole type check and unit tier too
FOLDERS = {"cuda": "gpu", "npu": "npu"}  # device type -> its folder (and its tests' names)
# What each project's own tox sets: the first-light plugin for npu runs on the PrivateUse1
# test device (tests/test_device, built by this project's tox and shared by its build cache).
DEVICE_ENVS = {"cuda": {}, "npu": {"NPU_TEST_DEVICE": "1"}}
RUFF = Path(sys.executable).parent / "ruff"


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
    prefixes = ("VLLM_TEMPLATE", "PYTEST", "NPU_TEST_DEVICE", FULL_ENV)
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


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


def _checked(projects: dict[str, Project]) -> dict[str, Project]:
    """The plugins whose whole type check and unit tier run here: the first-light one, and
    the full one too where ``SCAFFOLD_FULL=1`` (``tox -e scaffold``). The full plugin's
    are this project's own renamed (about 4 CPU-minutes CI does not spend twice); its
    lint and its engine parity run always."""
    return {d: p for d, p in projects.items() if d != "cuda" or os.environ.get(FULL_ENV) == "1"}


def test_generated_projects_pass_their_lint_and_type_check(projects) -> None:
    lint = [
        (f"ruff {device}", project.start(RUFF, *args))
        for device, project in projects.items()
        for args in (("check", "."), ("format", "--check", "."))
    ]
    _finish(lint, timeout=300)
    checked = _checked(projects)
    types = [(f"mypy {d}", p.start(p.python, "-m", "mypy")) for d, p in checked.items()]
    _finish(types, timeout=900)


def test_generated_projects_pass_their_unit_tests(projects) -> None:
    runs = []
    for device, project in _checked(projects).items():
        marker = f"not e2e and not {FOLDERS[device]}"  # the device tier's marker
        args = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker)
        env = DEVICE_ENVS[device]
        runs.append((f"unit tier ({device})", project.start(project.python, *args, env=env)))
    _finish(runs, timeout=1200)


def test_first_light_plugin_runs_vllm_on_the_test_device(projects) -> None:
    """The first-light plugin's own first-light tests on the PrivateUse1 test device: one and
    two devices, tokens equal transformers', weights and KV cache in its memory, its kernel
    table dispatched there. All of them must run: a skip means the device was not there."""
    project = projects["npu"]
    run = project.start(
        project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
        "tests/e2e/test_npu_first_light.py", env=DEVICE_ENVS["npu"],
    )  # fmt: skip
    output, _ = run.communicate(timeout=900)
    assert run.returncode == 0, output[-6000:]
    assert "6 passed" in output and "skipped" not in output, output[-3000:]


def test_generated_project_matches_transformers_on_its_cpu_backend(projects) -> None:
    """The default project's own e2e parity test: one eager engine on its CPU platform."""
    project = projects["cuda"]
    test = "tests/e2e/test_parity.py::test_matches_transformers[eager]"
    run = project.start(project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", test)
    _finish([("engine parity (default)", run)], timeout=900)


def test_first_light_plugins_doctor_finds_the_whole_contract_on_the_test_device(projects) -> None:
    """``vllm-acme doctor`` probes each row of the torch-extension contract on the device."""
    project = projects["npu"]
    proc = project.start(
        project.python, "-m", "vllm_acme_tools.cli.main", "doctor", "--json",
        env={"VLLM_ACME_DEVICE": "npu", **DEVICE_ENVS["npu"]},
    )  # fmt: skip
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    report = json.loads(next(ln for ln in reversed(output.splitlines()) if ln.startswith("{")))
    assert report["selection"]["platform"] == "vllm_acme.devices.npu.platform.AcmeNpuPlatform"
    assert report["torch_contract"] and not any(report["torch_contract"].values()), report


def test_vllm_shows_the_port_what_first_light_still_misses(projects) -> None:
    """vLLM resolving the platform with ``VLLM_ACME_DEVICE=npu`` and no npu device: the
    activation error names what is missing (for a device type other than the test device's,
    also the ``torch.distributed`` backend the identity table leaves to the vendor)."""
    project = projects["npu"]
    code = "from vllm.platforms import current_platform; current_platform.device_type"
    proc = project.start(project.python, "-c", code, env={"VLLM_ACME_DEVICE": "npu"})
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "AcmeActivationError" in output and "sees no npu device" in output, output[-3000:]
    identity = port_identity("npu")
    for hook in HOOKS:
        refused = f"names no {hook.field} for npu; see docs/porting-guide.md, {hook.section!r}"
        left_out = hook.field is not None and identity[hook.field] is None
        assert (refused in output) == (left_out and hook.tier == FIRST_LIGHT), hook.name


SPEED_TIER = Path(__file__).with_name("npu_speed_tier")  # the test device's kernels, as a vendor's
# Three prompts of 32 greedy tokens: one prefill step, then 31 decode steps.
FULL_DECODE = {"compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"}}
SPEED_RUN = ("--max-tokens", "32", "--engine-args", json.dumps(FULL_DECODE))


@pytest.fixture(scope="module")
def speed_report(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict:
    """The speed tier on the PrivateUse1 test device: a first-light plugin whose identity
    names ``torch.accelerator.Graph`` and whose kernel table and attention are the device's
    own operators (``npu_speed_tier/``), one engine with FULL decode graphs in the probe."""
    root = tmp_path_factory.mktemp("speed")
    project = generate("acme", root / "vllm-acme", "npu")
    folder = project / "vllm_acme/devices/npu"
    identity = folder / "identity.py"
    text = identity.read_text()
    assert text.count("    graph_api=None,\n") == 1
    identity.write_text(text.replace("    graph_api=None,\n", '    graph_api="accelerator",\n'))
    (folder / "kernels/__init__.py").write_text((SPEED_TIER / "kernels.py").read_text())
    (folder / "attention_kernels.py").write_text((SPEED_TIER / "attention_kernels.py").read_text())
    plugin = Project(project, _install(project, root / "venv"))
    run = plugin.start(
        plugin.python, "tests/e2e/device_probe.py", "--model-dir", tiny_model_dir, *SPEED_RUN,
        env={"VLLM_ACME_DEVICE": "npu", **DEVICE_ENVS["npu"]},
    )  # fmt: skip
    output, _ = run.communicate(timeout=900)
    assert run.returncode == 0, output[-6000:]
    report = json.loads(next(ln for ln in reversed(output.splitlines()) if ln.startswith("{")))
    report["_log"] = output
    return report


def test_speed_tier_on_the_test_device_replays_full_decode_graphs(speed_report) -> None:
    """Decode steps replay FULL graphs (counted from the runner): 31 decode steps of a
    batch of three, each one replay of the graph of four (the next capture size)."""
    assert speed_report["cudagraph_mode"] == "FULL_DECODE_ONLY", speed_report["graph_mode_reason"]
    full = speed_report["graphs"]["full"]
    assert full["captures"] and not full["eager_fallbacks"], full
    assert sum(full["replays"].values()) >= 31, full
    assert speed_report["graphs"]["replays"] == {}  # no pieces: nothing is compiled


def test_speed_tier_on_the_test_device_generates_transformers_tokens(
    speed_report, hf_greedy
) -> None:
    expected = hf_greedy(speed_report["prompt_token_ids"], **decoding_of(speed_report))
    assert speed_report["tokens"] == expected


def test_speed_tier_on_the_test_device_ran_the_devices_own_kernels(speed_report) -> None:
    """The device counted its kernels, in the prefill (launched) and in every replay."""
    counts = speed_report["device_dispatch"]
    for kernel in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "reshape_and_cache",
                   "paged_attention"):  # fmt: skip
        assert counts.get(f"npu_test::{kernel}", 0) > 0, kernel
        assert counts.get(f"replay:npu_test::{kernel}", 0) >= 31, kernel
    assert counts["runtime::Graph::replay"] >= 31
    assert speed_report["attention_backends"] and "npu_test" in speed_report["_log"]


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

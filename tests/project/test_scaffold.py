"""``vllm-template new``: the generated plugins install and pass their own checks on the CPU.

Both shapes are generated: the full plugin (``new acme``: its device folder for
CUDA and the CPU reference backend) and the first-light plugin (``new acme
--device my_dev``: the folder's first-light tier, identity table set to ``my_dev``, a
device type no torch nor this project names, so the test device runs under the
plugin's name).
Each is installed (editable, no dependencies) into a virtualenv that sees this
environment's packages through a ``.pth`` file, so vLLM is not installed
twice. The full one runs its own lint (ruff) and one engine parity run of its e2e
tier on its CPU backend, and its type check and whole unit tier where
``SCAFFOLD_FULL=1`` (``tox -e scaffold``: they are this project's own, renamed,
about four CPU-minutes CI does not spend twice). The first-light one's own lint,
type check, unit tier and device tests are its CI, which
``test_clean_machine.py`` runs on a clean machine; here its ``doctor`` probes the
torch-extension contract on the test device, and vLLM's own platform resolution
shows its user that no my_dev device is there without the test device. The speed
tier's three kernel roads run in an ``npu`` plugin as generated, with a capture
fault added. Independent steps run side by side (the machine has few cores; mypy
is one thread). On a machine with the device (GPU tier), the full project's own
device-tier parity tests run too.
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
from test_device_child import device_env_of

from vllm_platform_template.devices.gpu.availability import FIRST_LIGHT, HOOKS
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template_tools.cli.doctor import print_human
from vllm_platform_template_tools.cli.new import generate, port_identity
from vllm_platform_template_tools.cli.step_operators import FALLBACK, OWN

pytestmark = pytest.mark.e2e

PORT_DEVICE = "my_dev"  # the first-light plugin's device type: not npu (the test device's default)
DEVICES = ("cuda", PORT_DEVICE)
FULL_ENV = "SCAFFOLD_FULL"  # 1: the full plugin's whole type check and unit tier too
RUFF = Path(sys.executable).parent / "ruff"
LINT = (("check", "."), ("format", "--check", "."))


class Project:
    """A generated plugin installed into its own virtualenv."""

    def __init__(self, root: Path, python: Path) -> None:
        self.root, self.python = root, python

    @property
    def device_env(self) -> dict[str, str]:
        """What its own tox sets for its device (the test device is built by this project's
        tox and shared by its build cache)."""
        return device_env_of(self.root)

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


def _json_report(output: str) -> dict:
    """The JSON report a ``--json`` command printed last, among its log lines."""
    return json.loads(next(ln for ln in reversed(output.splitlines()) if ln.startswith("{")))


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


def test_generated_full_plugin_passes_its_lint_and_type_check(projects) -> None:
    """Its lint always; its type check where ``SCAFFOLD_FULL=1`` (this project's own mypy,
    renamed: about 2 CPU-minutes CI does not spend twice)."""
    project = projects["cuda"]
    lint = [(f"ruff {args[0]}", project.start(RUFF, *args)) for args in LINT]
    _finish(lint, timeout=300)
    if os.environ.get(FULL_ENV) == "1":
        _finish([("mypy", project.start(project.python, "-m", "mypy"))], timeout=900)


@pytest.mark.skipif(os.environ.get(FULL_ENV) != "1", reason=f"{FULL_ENV}=1 (tox -e scaffold)")
def test_generated_full_plugin_passes_its_unit_tests(projects) -> None:
    """Its whole unit tier (this project's own, renamed) without its device tier."""
    project = projects["cuda"]
    args = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not e2e and not gpu")
    _finish([("unit tier", project.start(project.python, *args))], timeout=1200)


def test_generated_project_matches_transformers_on_its_cpu_backend(projects) -> None:
    """The default project's own e2e parity test: one eager engine on its CPU platform."""
    project = projects["cuda"]
    test = "tests/full_plugin/test_parity.py::test_matches_transformers[eager]"
    run = project.start(project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", test)
    _finish([("engine parity (default)", run)], timeout=900)


def test_first_light_plugins_doctor_finds_the_whole_contract_on_the_test_device(
    projects, capsys
) -> None:
    """``vllm-acme doctor`` probes each row of the torch-extension contract on the device."""
    project = projects[PORT_DEVICE]
    proc = project.start(
        project.python, "-m", "vllm_acme_tools.cli.main", "doctor", "--json",
        env={"VLLM_ACME_DEVICE": PORT_DEVICE, **project.device_env},
    )  # fmt: skip
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    report = _json_report(output)
    platform = f"vllm_acme.devices.{PORT_DEVICE}.platform.AcmeMyDevPlatform"
    assert report["selection"]["platform"] == platform
    assert report["torch_contract"] and not any(report["torch_contract"].values()), report
    # one decode step on the test device: its extension's kernels where it has them, the
    # projections' and the embedding's operators through its CPU fallback (the guide's table)
    steps = report["step_operators"]
    assert steps["dispatch_key"] == "PrivateUse1", steps
    served = {name: entry["served_by"] for name, entry in steps["operators"].items()}
    for kernel in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"):
        assert served[f"{PORT_DEVICE}::{kernel}"] == OWN, served
    assert served[f"{PORT_DEVICE}::paged_attention"] == OWN, served
    fallback = {name for name, by in served.items() if by == FALLBACK}
    assert fallback == {"aten::mm.out", "aten::index_select", "aten::argmax.out"}, served
    assert steps["operators"]["aten::mm.out"]["calls"] == 5  # qkv, o, gate_up, down, lm head
    print_human(report)  # the human format of the same report (the plugin's is this, renamed)
    assert "one decode step's operators on my_dev" in capsys.readouterr().out


def test_vllm_shows_the_port_what_first_light_still_misses(projects) -> None:
    """vLLM resolving the platform with ``VLLM_ACME_DEVICE=my_dev`` and no such device (the
    test device not registered): the entry point's error names what is missing."""
    project = projects[PORT_DEVICE]
    code = "from vllm.platforms import current_platform; current_platform.device_type"
    proc = project.start(project.python, "-c", code, env={"VLLM_ACME_DEVICE": PORT_DEVICE})
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "AcmePlatformError" in output, output[-3000:]
    assert f"sees no {PORT_DEVICE} device" in output, output[-3000:]
    identity = port_identity(PORT_DEVICE)
    for hook in HOOKS:
        refused = (
            f"names no {hook.field} for {PORT_DEVICE}; see docs/porting-guide.md, {hook.section!r}"
        )
        left_out = hook.field is not None and identity[hook.field] is None
        assert (refused in output) == (left_out and hook.tier == FIRST_LIGHT), hook.name


# The test's capture fault, appended to the speed tier's kernel table: a host read in the
# one-token step, which the device refuses while it captures (that graph's capture fails
# and its size runs eagerly); eager steps of one token read the value as any host sync does.
CAPTURE_FAULT = """

_device_silu_and_mul = silu_and_mul


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:  # noqa: F811
    if x.numel() == x.shape[-1]:  # one token
        float(x.reshape(-1)[0])
    return _device_silu_and_mul(x)
"""
# Three prompts of 32 greedy tokens, at most two at once: the first two prefill in one step
# and decode 31 steps as a batch of two (replays of the graph of two), then the third
# prefills and decodes 31 steps alone (the size whose capture the fault breaks: eagerly).
FULL_DECODE = {"compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"}, "max_num_seqs": 2}
COMPILED = {**FULL_DECODE, "compilation_config": {**FULL_DECODE["compilation_config"], "mode": 3}}
HW_AGNOSTIC = {**FULL_DECODE, "model_impl": "transformers"}
# The kernel roads, each one engine with FULL decode graphs: vLLM IR under the compiler's
# fusion_only stage (its passes and IR lowering place the kernels; no code generation), the
# CustomOp road and the hardware-agnostic road (vLLM's Transformers backend), uncompiled.
SPEED_ROADS = {  # road -> (device_probe.py arguments, environment)
    "ir": (["--compile-stage", "fusion_only", "--engine-args", json.dumps(COMPILED)], {}),
    "custom_op": (["--kernel-road", "custom_op", "--engine-args", json.dumps(FULL_DECODE)], {}),
    "hw_agnostic": (["--engine-args", json.dumps(HW_AGNOSTIC)], {"VLLM_USE_HW_AGNOSTIC": "1"}),
}
SPEED_RUN = ["tests/devices/npu/device_probe.py", "--max-tokens", "32", "--model-dir"]
DEVICE_KERNELS = ("rms_norm", "silu_and_mul", "reshape_and_cache", "paged_attention")


@pytest.fixture(scope="module")
def speed_reports(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict:
    """The speed tier on the PrivateUse1 test device: a first-light plugin as generated
    (torch.accelerator.Graph, the device's kernels and attention from its extension), with
    the capture fault added to its kernels, one engine per kernel road (side by side),
    FULL decode graphs in each."""
    root = tmp_path_factory.mktemp("speed")
    project = generate("acme", root / "vllm-acme", "npu")
    kernels = project / "vllm_acme/devices/npu/kernels/__init__.py"
    kernels.write_text(kernels.read_text() + CAPTURE_FAULT)
    plugin = Project(project, _install(project, root / "venv"))
    device_env = {"VLLM_ACME_DEVICE": "npu", **plugin.device_env}
    runs = {
        road: plugin.start(plugin.python, *SPEED_RUN, tiny_model_dir, *args, env=device_env | env)
        for road, (args, env) in SPEED_ROADS.items()
    }
    reports = {}
    for road, run in runs.items():
        output, _ = run.communicate(timeout=900)
        assert run.returncode == 0, f"{road}:\n{output[-6000:]}"
        report = _json_report(output)
        reports[road] = report | {"_log": output}
    return reports


@pytest.mark.parametrize("road", SPEED_ROADS)
def test_speed_tier_replays_full_decode_graphs_on_the_test_device(speed_reports, road) -> None:
    """Decode steps replay FULL graphs (counted from the runner): the 31 steps of the batch
    of two, each one replay of the graph of two; the 31 one-token steps ran eagerly."""
    report = speed_reports[road]
    assert report["cudagraph_mode"] == "FULL_DECODE_ONLY", report["graph_mode_reason"]
    full = report["graphs"]["full"]
    assert full["captures"] == {"2": 1} and full["replays"]["2"] >= 31, full
    assert report["device_dispatch"]["runtime::Graph::replay"] >= 31


@pytest.mark.parametrize("road", SPEED_ROADS)
def test_a_capture_that_breaks_the_devices_rules_runs_that_size_eagerly(
    speed_reports, road
) -> None:
    """The one-token capture read a value to the host: the device refused it, the wrapper
    said so once, naming the device's reason, and that size ran eagerly (never replayed)."""
    report = speed_reports[road]
    full = report["graphs"]["full"]
    assert full["eager_fallbacks"] == {"1": 1} and "1" not in full["replays"], full
    warnings = [ln for ln in report["_log"].splitlines() if "graph capture failed" in ln]
    assert len(warnings) == 1, warnings
    assert "num_tokens=1," in warnings[0] and "reading a value to the host" in warnings[0]


@pytest.mark.parametrize("road", SPEED_ROADS)
def test_speed_tier_generates_transformers_tokens_on_the_test_device(
    speed_reports, road, hf_greedy
) -> None:
    """All three prompts: two decoded in replays, the third eagerly."""
    report = speed_reports[road]
    assert report["tokens"] == hf_greedy(report["prompt_token_ids"], **decoding_of(report))


@pytest.mark.parametrize("road", SPEED_ROADS)
def test_speed_tier_ran_the_devices_own_kernels(speed_reports, road) -> None:
    """The device counted its kernels, in the steps it launched and in every replay; the
    TEMPLATE_ATTN backend ran the device's attention."""
    counts = speed_reports[road]["device_dispatch"]
    for kernel in DEVICE_KERNELS:
        assert counts.get(f"npu::{kernel}", 0) > 0, kernel
        assert counts.get(f"replay:npu::{kernel}", 0) >= 31, kernel
    assert speed_reports[road]["attention_backends"]
    assert "ACME_ATTN path npu::paged_attention " in speed_reports[road]["_log"]


def test_each_road_reached_the_device_kernels_its_own_way(speed_reports) -> None:
    """vLLM IR: RMSNorm and the residual add-norm through the folder's IR provider, placed by
    the fusion_only stage's IR lowering (its passes ran on the device: SiluAndMul fused);
    CustomOp: the layers' forward_oot, IR keeping native; hardware-agnostic: vLLM's
    Transformers backend, whose norm and gated activation are the plugin's replacements."""
    ir, custom_op, hw = (speed_reports[r] for r in SPEED_ROADS)
    assert ir["compilation_mode"] == "VLLM_COMPILE" and ir["compile"]["stage"] == "fusion_only"
    assert not ir["compile"]["fallbacks"] and ir["compile"]["pieces"] >= 1, ir["compile"]
    lowered = ir["compile"]["lowering"]  # op -> provider -> nodes lowered to it
    assert set(lowered) == {"rms_norm", "fused_add_rms_norm"}, lowered
    assert all(set(providers) == {"acme_npu"} for providers in lowered.values()), lowered
    assert ir["compile"]["fusion_matches"]["SiluAndMulFusionPass"] > 0, ir["compile"]
    assert ir["device_dispatch"]["replay:npu::fused_add_rms_norm"] >= 31
    assert custom_op["compilation_mode"] == "NONE"
    assert custom_op["ir_ops"]["rms_norm"]["priority"] == ["native"]
    assert custom_op["custom_op_layers"]["AcmeRMSNorm"] == ["forward_oot"]
    assert custom_op["device_dispatch"]["replay:npu::fused_add_rms_norm"] >= 31
    assert hw["model_class"].endswith("TransformersForCausalLM")
    assert hw["custom_op_layers"]["AcmeTPAwareRMSNorm"] == ["forward_oot"]
    assert hw["custom_op_layers"]["AcmeHwAgnosticSiluAndMul"] == ["forward_oot"]


@pytest.mark.gpu
@pytest.mark.timeout(900)  # generation, installs and two engine starts (GPU tier: 420 s a test)
@pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {IDENTITY.device_type} device")
def test_generated_device_folder_matches_transformers_on_the_device(projects) -> None:
    """GPU tier: the default project's own device-tier parity, eager and with its graphs."""
    project = projects["cuda"]
    tests = "test_eager_matches_transformers_on_gpu_and_cpu or test_default_graphs_capture_replay"
    run = project.start(
        project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
        "tests/devices/gpu/speed_tier/test_gpu_engine.py", "-k", tests,
    )  # fmt: skip
    _finish([("device-tier parity (default)", run)], timeout=900)

"""``vllm-template new``: its manifest and what it writes, checked without installing anything.

Both variants are generated once: the default (the device folder for CUDA) and
``--device npu`` (the same folder with its identity table set to ``npu``).
The manifest must decide every file of this project; the output must hold two
device folders, no identity or H100 run of this project, no path that leads
nowhere, and configuration for what it holds. ``tests/e2e/test_scaffold.py``
installs the output and runs its own checks.
"""

from __future__ import annotations

import re
import runpy
import subprocess
from pathlib import Path

import pytest

from vllm_platform_template.cli.new import (
    COPIED,
    LEFT_OUT,
    SKIPPED_PARTS,
    TOX_SECTIONS_LEFT_OUT,
    classify,
    generate,
    port_identity,
    renamer,
    set_identity,
)
from vllm_platform_template.devices.gpu.identity import IDENTITY

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"cuda": "gpu", "npu": "npu"}  # device type -> its folder in the generated package
# Deliberately kept: the Triton kernels' launch constants say on which GPU they were tuned,
# and the embedded model's training record (and its script) where its weights were trained.
H100_ALLOWED = re.compile(
    r"vllm_acme/devices/\w+/kernels/|vllm_acme/embedded_model/trained/|tools/train_tiny_model.py"
)
# Paths a generated file may name that are not its own (vLLM's source tree).
UPSTREAM_PATHS = {"tests/models/utils.py"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("new")
    return {device: generate("acme", root / device, device) for device in FOLDERS}


def _texts(project: Path) -> dict[str, str]:
    return {
        p.relative_to(project).as_posix(): p.read_text()
        for p in sorted(project.rglob("*"))
        if p.is_file() and p.suffix != ".safetensors"
    }


def test_every_file_of_this_project_is_copied_or_left_out_with_a_reason() -> None:
    try:
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    assert [p for p in tracked if classify(p) is None] == [], "add them to COPIED or LEFT_OUT"
    assert [e.path for e in (*COPIED, *LEFT_OUT) if not (ROOT / e.path).exists()] == []
    assert all(e.why for e in (*COPIED, *LEFT_OUT))


@pytest.mark.parametrize("device", FOLDERS)
def test_two_backends_and_nothing_of_this_project_only(generated, device: str) -> None:
    project = generated[device]
    package = project / "vllm_acme"
    folders = sorted(p.name for p in (package / "devices").iterdir() if (p / "device.py").is_file())
    assert folders == sorted(["cpu", FOLDERS[device]])
    for gone in ("benchmarks", "docs/results", "docs/performance.md", "tools/gpu_bundle.py",
                 "tools/gpu_tier.sh", "vllm_acme/cli/new.py", "scaffold",
                 "tests/e2e/test_scaffold.py", "tests/unit/test_xpu_device.py"):  # fmt: skip
        assert not (project / gone).exists(), gone
    assert (project / "README.md").is_file() and (project / "docs/porting-guide.md").is_file()
    assert [p.name for p in project.rglob("*") if p.name in SKIPPED_PARTS] == []  # no caches
    assert (package / "embedded_model/trained/tiny.safetensors").stat().st_size > 1 << 20


@pytest.mark.parametrize("device", FOLDERS)
def test_no_identity_or_h100_run_of_this_project_is_left(generated, device: str) -> None:
    texts = _texts(generated[device])
    leftovers = [
        f"{path}: {line.strip()}"
        for path, text in texts.items()
        for line in text.splitlines()
        if re.search("template", line.replace("TemplateProcessing", ""), re.IGNORECASE)
    ]
    assert leftovers == []
    assert [p for p in texts if "template" in p.lower()] == []
    h100 = [p for p, text in texts.items() if "H100" in text and not H100_ALLOWED.match(p)]
    assert h100 == []
    assert not any(re.search(r"\bxpu\b|ipex", p, re.IGNORECASE) for p in texts)
    assert [p for p, text in texts.items() if re.search("ipex", text, re.IGNORECASE)] == []


# A path of the project (from its root, its package, or the file's own folder), with an
# optional ::test name.
PATH_REFERENCE = re.compile(
    r"(?<![\w./-])((?:tests|docs|tools|\.ci|vllm_acme|devices|kernels|compiler|attention"
    r"|platform_plugin|graph_wrapper|custom_ops|ir_impls|models|conformance|embedded_model)"
    r"/[\w./-]*[\w/])(?:::(\w+))?"
)


def _missing_references(project: Path) -> list[str]:
    missing = []
    for path, text in _texts(project).items():
        here = (project / path).parent
        for found, test in PATH_REFERENCE.findall(text):
            if found in UPSTREAM_PATHS:
                continue
            bases = [project, project / "vllm_acme", *here.parents, here]
            target = next((b / found for b in bases if (b / found).exists()), None)
            if target is None:
                missing.append(f"{path}: {found}")
            elif test and not re.search(
                rf"^\s*(def|class) {test}\b|^{test}\b\s*[:=]", target.read_text(), re.MULTILINE
            ):
                missing.append(f"{path}: {found}::{test}")
    return missing


@pytest.mark.parametrize("device", FOLDERS)
def test_every_path_and_test_a_generated_file_names_exists(generated, device: str) -> None:
    assert _missing_references(generated[device]) == []


def test_the_reference_check_finds_a_missing_path_and_test(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_a.py").write_text("def test_here(): ...\n")
    (tmp_path / "README.md").write_text(
        "see tests/test_a.py::test_here, tests/test_a.py::test_gone and docs/gone.md\n"
    )
    assert sorted(_missing_references(tmp_path)) == [
        "README.md: docs/gone.md",
        "README.md: tests/test_a.py::test_gone",
    ]


def test_the_port_identity_table_is_written_and_the_default_kept(generated) -> None:
    tables = {d: generated[d] / f"vllm_acme/devices/{f}/identity.py" for d, f in FOLDERS.items()}
    identity = {device: runpy.run_path(str(path))["IDENTITY"] for device, path in tables.items()}
    assert vars(identity["cuda"]) == vars(IDENTITY)
    assert vars(identity["npu"]) == port_identity("npu")


def test_settings_register_the_device_folder_under_its_type(generated) -> None:
    for device, folder in FOLDERS.items():
        settings = runpy.run_path(str(generated[device] / "vllm_acme/settings.py"))
        assert settings["DEVICE_PACKAGES"] == {
            "cpu": "vllm_acme.devices.cpu",
            device: f"vllm_acme.devices.{folder}",
        }
        qualname = settings["PLATFORM_QUALNAMES"][device]
        module, cls = qualname.rsplit(".", 1)
        source = generated[device] / (module.replace(".", "/") + ".py")
        assert f"class {cls}(" in source.read_text()
        assert cls == f"Acme{folder.capitalize()}Platform"


def test_configuration_holds_only_what_is_copied(generated) -> None:
    project = generated["npu"]
    sections = re.findall(r"^\[(.+)\]$", (project / "tox.ini").read_text(), re.MULTILINE)
    assert sections and not set(TOX_SECTIONS_LEFT_OUT) & set(sections)
    for config in ("tox.ini", "pyproject.toml", ".ci/run"):
        assert "ipex" not in (project / config).read_text().lower(), config
    assert '"new"' not in (project / "vllm_acme/cli/main.py").read_text()
    pyproject = (project / "pyproject.toml").read_text()
    assert 'name = "vllm-acme"' in pyproject and 'acme = "vllm_acme:register"' in pyproject
    assert "(devices/npu)" in pyproject
    assert ((project / ".ci/run").stat().st_mode & 0o111) != 0


def test_the_readme_says_what_is_verified_for_its_device(generated) -> None:
    default, port = ((generated[d] / "README.md").read_text() for d in FOLDERS)
    assert "to run on an NVIDIA GPU as generated" in default and "`cuda`" in default
    assert "NVIDIA GPU as generated" not in port
    assert "VLLM_ACME_DEVICE=npu vllm-acme doctor" in port
    assert "vllm_acme/devices/npu/" in port
    for readme in (default, port):
        assert "<!--" not in readme and "@device@" not in readme


def test_set_identity_rewrites_only_the_values() -> None:
    source = 'X = 1\nIDENTITY = DeviceIdentity(\n    a="cuda",  # keep me\n    b=None,\n)\n'
    assert set_identity(source, {"a": "npu", "b": "hccl"}) == (
        'X = 1\nIDENTITY = DeviceIdentity(\n    a="npu",  # keep me\n    b="hccl",\n)\n'
    )
    with pytest.raises(SystemExit, match="table has"):
        set_identity(source, {"a": "npu"})


def test_every_spelling_of_the_name_is_renamed() -> None:
    rename = renamer("acme")
    text = "vllm_platform_template vllm-template TemplateGpuPlatform TEMPLATE_ATTN template_cpu"
    assert rename(text) == "vllm_acme vllm-acme AcmeGpuPlatform ACME_ATTN acme_cpu"
    assert rename("processors.TemplateProcessing(") == "processors.TemplateProcessing("


@pytest.mark.parametrize(
    ("name", "device", "message"),
    [
        ("Acme", "cuda", "invalid name"),
        ("template", "cuda", "invalid name"),
        ("acme", "cpu", "invalid device"),
        ("acme", "npu-1", "invalid device"),
    ],
)
def test_bad_names_are_refused_with_what_to_use(tmp_path, name, device, message) -> None:
    with pytest.raises(SystemExit, match=message):
        generate(name, tmp_path / "out", device)


def test_a_non_empty_target_is_refused(tmp_path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="not empty"):
        generate("acme", tmp_path)

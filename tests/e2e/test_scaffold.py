"""``vllm-template new acme --device npu``: a generated plugin installs and passes its tests.

The new project is installed into a fresh virtualenv that sees this
environment's packages through a ``.pth`` file (vLLM itself is not installed
twice), then runs its own fast tier - the conformance kit and the import-graph
checks included, with the added ``npu`` device folder registered - and its
demo on its own CPU platform; asking for the ``npu`` device on this machine
gives the user the folder's "no such device" message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from vllm_platform_template.cli.new import generate

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("scaffold")
    project = generate("acme", root / "vllm-acme", device="npu")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    Path(site, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "-e", str(project)],
        check=True, timeout=600,
    )  # fmt: skip
    return project, python


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_TEMPLATE", "PYTEST"))}


def test_generated_project_is_renamed(acme) -> None:
    project, _ = acme
    text = (project / "vllm_acme" / "devices" / "cpu" / "platform.py").read_text()
    assert "class AcmeCpuPlatform" in text and "Template" not in text
    pyproject = (project / "pyproject.toml").read_text()
    assert 'name = "vllm-acme"' in pyproject and 'acme = "vllm_acme:register"' in pyproject
    assert "VLLM_ACME_DEVICE" in (project / "vllm_acme/settings.py").read_text()


def test_the_new_device_is_one_registered_folder(acme) -> None:
    project, _ = acme
    folder = project / "vllm_acme" / "devices" / "npu"
    platform = (folder / "platform.py").read_text()
    assert "class AcmeNpuPlatform" in platform
    assert 'device_type = "npu"' in platform and 'dispatch_key = "PrivateUse1"' in platform
    assert "torch.cuda" not in platform and "torch.npu" in platform
    assert 'ir_provider="acme_npu"' in (folder / "device.py").read_text()
    settings = (project / "vllm_acme" / "settings.py").read_text()
    assert '"npu": f"{PACKAGE}.devices.npu"' in settings
    assert "AcmeNpuPlatform" in settings


def test_generated_project_passes_its_fast_tier(acme) -> None:
    project, python = acme
    result = subprocess.run(
        [str(python), "-m", "pytest", "-m", "not e2e and not gpu", "-q", "-p", "no:cacheprovider",
         "tests/unit", "vllm_acme/models"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def test_generated_project_runs_vllm_on_its_platform(acme) -> None:
    project, python = acme
    result = subprocess.run(
        [str(python), "-m", "vllm_acme.cli.main", "demo", "--enforce-eager", "--json"],
        cwd=project, env={**_env(), "VLLM_CACHE_ROOT": str(project / ".cache")},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["platform"] == "vllm_acme.devices.cpu.platform.AcmeCpuPlatform"
    assert report["attention_backends"] == ["ACME_ATTN"]
    assert all(len(tokens) == 24 for tokens in report["tokens"])


def test_asking_for_the_new_device_without_it_says_so(acme) -> None:
    project, python = acme
    code = "from vllm.platforms import current_platform; current_platform.device_type"
    result = subprocess.run(
        [str(python), "-c", code],
        cwd=project, env={**_env(), "VLLM_ACME_DEVICE": "npu"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode != 0
    assert "VLLM_ACME_DEVICE=npu" in result.stderr and "sees no npu device" in result.stderr

"""What ``tools/gpu_bundle.py`` packs: compiled files by content, unused parts left out."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gpu_bundle.py"


@pytest.fixture(scope="module")
def bundle():
    spec = importlib.util.spec_from_file_location("gpu_bundle", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bundle"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "head",
    [b"\x7fELF\x02\x01", b"\xcf\xfa\xed\xfe\x07\x00", b"\xca\xfe\xba\xbe\x00", b"MZ\x90\x00"],
    ids=["elf", "mach-o-64", "mach-o-universal", "pe"],
)
def test_machine_code_is_recognised_by_content(bundle, head: bytes) -> None:
    assert bundle.is_compiled(head)


@pytest.mark.parametrize("head", [b"# SPDX", b'{"a":', b"import o", b"\x89PNG\r\n"])
def test_text_and_data_are_not_compiled(bundle, head: bytes) -> None:
    assert not bundle.is_compiled(head)


def test_vllm_files_left_out_with_reasons(bundle) -> None:
    elf = b"\x7fELF\x02\x01\x01\x00"
    assert "compiled" in bundle.vllm_left_out_reason("vllm/vllm-rs", elf)
    assert bundle.vllm_left_out_reason("vllm/third_party/x/include/a.hpp", b"// c++") is not None
    assert bundle.vllm_left_out_reason("vllm/third_party/pynvml.py", b"# SPDX") is None
    assert bundle.vllm_left_out_reason("vllm/config/model.py", b"# SPDX") is None


def test_extract_counts_what_it_leaves_out(bundle, tmp_path: Path) -> None:
    wheel = tmp_path / "vllm-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("vllm/__init__.py", "# SPDX\n")
        zf.writestr("vllm/vllm-rs", b"\x7fELF" + b"\0" * 100)
        zf.writestr("vllm/_C.abi3.so", b"\x7fELF" + b"\0" * 10)
        zf.writestr("vllm/third_party/lib/include/x.hpp", "#pragma once\n")
        zf.writestr("vllm-0.0.0.dist-info/METADATA", "Name: vllm\n")
    site = tmp_path / "site"
    count, left_out = bundle.extract_python_files(wheel, site)
    assert count == 2
    assert (site / "vllm" / "__init__.py").is_file()
    assert not (site / "vllm" / "vllm-rs").exists()
    compiled = next(v for k, v in left_out.items() if k.startswith("compiled"))
    assert compiled == {"files": 2, "bytes": 104 + 14}
    json.dumps(left_out)  # goes into the manifest


def _install(name: str, version: str, *requires: str) -> dict:
    """One entry of pip's ``--report`` "install" list."""
    return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)}}


def test_what_is_packed_and_what_is_left_out_with_why(bundle) -> None:
    installs = [
        _install("torch", "2.11.0+machine"),
        _install("openai", "3.57.0", "jiter<1", "anyio"),
        _install("jiter", "0.19.0"),
        _install("anyio", "4.15.1"),
        _install("anthropic", "2.13.0", "jiter<1", "docstring-parser"),
        _install("docstring-parser", "0.18.0"),
        _install("instanttensor", "0.2.2", "torch>=2.8"),
        _install("outlines_core", "0.2.14", "torch; extra == 'test'"),
        _install("fastapi", "0.136.3", "uvicorn; extra == 'standard'", "rich; extra == 'all'"),
        _install("uvicorn", "0.54.0"),
        _install("rich", "15.0.0"),
    ]
    wanted = ["openai", "anthropic", "instanttensor>=0.2.2", "outlines_core", "fastapi[standard]"]
    machine = {"torch": "2.11.0", "anyio": "4.15.1", "rich": "15.0.0"}
    kept, left_out, dropped = bundle.classify(installs, wanted, machine, "3.12")
    # anthropic is unused: out with what only it needs; jiter stays for openai; the
    # machine's packages are never packed; fastapi's requested extra is followed.
    assert kept == {"openai", "jiter", "outlines-core", "fastapi", "uvicorn"}
    assert dropped == {
        "anthropic": {"version": "2.13.0", "why": bundle.DISTRIBUTIONS_LEFT_OUT["anthropic"]}
    }
    # A kernel library on torch is out; a test-only torch extra does not count.
    assert set(left_out) == {"instanttensor>=0.2.2"}
    assert "builds on torch/CUDA (torch)" in left_out["instanttensor>=0.2.2"]


def test_every_glibc_minor_is_a_platform_tag(bundle) -> None:
    # nvidia-nccl-cu13 2.28.9, which the machine's torch pins, is manylinux_2_18 only.
    for minor in range(5, bundle.MACHINE_GLIBC_MINOR + 1):
        assert f"manylinux_2_{minor}_x86_64" in bundle.MANYLINUX_TAGS
    assert "manylinux_2_36_x86_64" not in bundle.MANYLINUX_TAGS


def test_pip_reads_only_what_the_build_names(bundle) -> None:
    env = bundle.pip_env(
        {
            "PATH": "/bin",
            "PIP_FIND_LINKS": "/opt/wheels",
            "PIP_EXTRA_INDEX_URL": "file:///opt/pypi/simple",
            "PIP_CONSTRAINT": "/etc/xdg/pip/constraints.txt",
            "PIP_INDEX_URL": "https://mirror.example/simple",
            "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
        }
    )
    assert env == {
        "PATH": "/bin",
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
        "PIP_CONFIG_FILE": os.devnull,
    }
    flags = bundle.Source("3.12").flags()
    assert flags[flags.index("--index-url") + 1] == bundle.DEFAULT_INDEX_URL
    assert flags[flags.index("--uploaded-prior-to") + 1] == bundle.DEFAULT_UPLOADED_PRIOR_TO
    assert "--uploaded-prior-to" not in bundle.Source("3.12", uploaded_prior_to=None).flags()


def test_machine_packages_are_given_as_installed(bundle, tmp_path: Path) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    pins = bundle.write_machine_wheels(
        {"torch": "2.11.0", "nvidia-nccl-cu13": "2.28.9", "odd": "not a version"}, tmp_path
    )
    assert pins == {"torch": "torch==2.11.0", "nvidia-nccl-cu13": "nvidia-nccl-cu13==2.28.9"}
    wheel = tmp_path / "torch-2.11.0+machine-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read("torch-2.11.0+machine.dist-info/METADATA").decode()
    assert "Version: 2.11.0+machine" in metadata
    assert "Requires-Dist" not in metadata  # its CUDA wheels are the machine's business
    # The constraint admits the stub, and pip prefers it to the index's 2.11.0.
    assert Version("2.11.0+machine") in SpecifierSet("==2.11.0")
    assert Version("2.11.0+machine") > Version("2.11.0")


TOO_DEEP = """\
Collecting instanttensor>=0.2.2
Collecting torch>=2.8.0 (from instanttensor>=0.2.2)
Collecting googleapis-common-protos~=1.57 (from opentelemetry-exporter-otlp-proto-grpc==1.45.2->opentelemetry-exporter-otlp>=1.27.0)
INFO: pip is looking at multiple versions of torch to determine which version is compatible with other requirements. This could take a while.
INFO: pip is still looking at multiple versions of torch to determine which version is compatible with other requirements. This could take a while.
INFO: pip is looking at multiple versions of googleapis-common-protos to determine which version is compatible with other requirements. This could take a while.
error: resolution-too-deep
"""  # noqa: E501
CONFLICT = """\
ERROR: Cannot install flashinfer-python==0.7.0.post1, mistral_common[image]>=1.11.6 and tilelang==0.1.12 because these package versions have conflicting dependencies.

The conflict is caused by:
    mistral-common 1.13.1 depends on numpy<2.4 and >=1.25; python_version <= "3.12"
    The user requested (constraint) numpy==2.5.2

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""  # noqa: E501


def test_pip_logs_name_the_culprit(bundle) -> None:
    assert bundle.backtracked(TOO_DEEP) == ["torch", "googleapis-common-protos"]
    assert bundle.required_by(TOO_DEEP, "torch") == ["instanttensor"]
    assert bundle.required_by(TOO_DEEP, "googleapis-common-protos") == [
        "opentelemetry-exporter-otlp"
    ]
    assert bundle.pip_reason(TOO_DEEP) == "error: resolution-too-deep"
    assert bundle.conflict_named(CONFLICT) == {"flashinfer-python", "mistral-common", "tilelang"}
    assert bundle.pip_reason(CONFLICT) == (
        'conflict: mistral-common 1.13.1 depends on numpy<2.4 and >=1.25; python_version <= "3.12"'
        "; The user requested (constraint) numpy==2.5.2"
    )


def _fake_pip(bundle, monkeypatch, outcomes: dict[str, tuple]) -> list[list[str]]:
    """``_dry_run`` answering from ``outcomes``: by name for one requirement named
    there, else ``outcomes["all"](requirements)``."""
    calls: list[list[str]] = []

    def dry_run(requirements, constraints, source, work):
        calls.append(list(requirements))
        assert source.machine_wheels is not None and constraints.is_file()
        alone = len(requirements) == 1 and bundle.requirement_name(requirements[0]) in outcomes
        if alone:
            return outcomes[bundle.requirement_name(requirements[0])]
        return outcomes["all"](requirements)

    monkeypatch.setattr(bundle, "_dry_run", dry_run)
    return calls


def test_a_requirement_that_fails_alone_is_left_out(bundle, monkeypatch, tmp_path) -> None:
    def whole(requirements):
        if any(r.startswith("instanttensor") for r in requirements):
            return None, TOO_DEEP
        return [_install("openai", "3.57.0")], ""

    _fake_pip(
        bundle,
        monkeypatch,
        {"all": whole, "instanttensor": (None, "ERROR: No matching distribution found for torch")},
    )
    pins, satisfied, left_out, _ = bundle.resolve_missing(
        ["openai", "instanttensor>=0.2.2", "numpy"], {"numpy": "2.5.2"}, bundle.Source("3.12"),
        tmp_path,
    )  # fmt: skip
    assert pins == [("openai", "3.57.0")]
    assert satisfied == ["numpy"]
    assert left_out == {"instanttensor>=0.2.2": "ERROR: No matching distribution found for torch"}


def test_an_unresolvable_whole_names_the_culprit(bundle, monkeypatch, tmp_path) -> None:
    _fake_pip(
        bundle,
        monkeypatch,
        {"all": lambda r: (None, TOO_DEEP), "instanttensor": ([_install("x", "1")], "")},
    )
    with pytest.raises(bundle.ResolutionError) as failure:
        bundle.resolve_missing(
            ["openai", "instanttensor>=0.2.2"], {}, bundle.Source("3.12"), tmp_path
        )
    message = str(failure.value)
    assert "resolution-too-deep" in message
    assert "torch (brought in by instanttensor)" in message
    assert bundle.DEFAULT_UPLOADED_PRIOR_TO in message


def test_the_same_files_give_the_same_archive(bundle, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("# SPDX\n")
    archive = tmp_path / bundle.ARCHIVE
    bundle.write_archive(site, archive)
    first = bundle.sha256(archive)
    os.utime(site / "vllm" / "__init__.py", (0, 0))
    bundle.write_archive(site, archive)
    assert bundle.sha256(archive) == first


def test_one_part_when_it_fits_and_install_joins_parts(bundle, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_bytes(os.urandom(3 << 19))  # 1.5 MiB, incompressible
    archive = tmp_path / bundle.ARCHIVE
    with tarfile.open(archive, "w:xz", preset=0) as tar:
        tar.add(site, arcname=".")
    args = ["build", "--vllm", "0.32.0", "--machine-pip-list", "l", "--out", "o"]
    assert bundle.parser().parse_args(args).part_mib == bundle.PART_MIB <= 64 - 6
    assert len(bundle.split_archive(archive, tmp_path / "one", bundle.PART_MIB)) == 1
    out = tmp_path / "two"
    parts = bundle.split_archive(archive, out, 1)
    assert [p["name"] for p in parts] == [f"{bundle.ARCHIVE}.part00", f"{bundle.ARCHIVE}.part01"]
    manifest = {"vllm": "0", "added": [], "parts": parts, "archive_sha256": bundle.sha256(archive)}
    (out / bundle.MANIFEST).write_text(json.dumps(manifest))
    bundle.main(["install", str(out), "--target", str(tmp_path / "target")])
    assert (tmp_path / "target" / "vllm" / "__init__.py").read_bytes() == (
        site / "vllm" / "__init__.py"
    ).read_bytes()


@pytest.mark.parametrize(
    ("pip_found", "packaging_found", "says"),
    [
        ("23.2.1", True, ["pip>=26.0 (found 23.2.1: no --uploaded-prior-to)"]),
        ("26.3", False, ["packaging (not installed)"]),
        ("23.2.1", False, ["pip>=26.0 (found 23.2.1", "and packaging (not installed)"]),
        ("unknown", True, ["pip>=26.0 (found unknown"]),
    ],
)
def test_build_says_in_one_line_what_it_lacks(bundle, pip_found, packaging_found, says) -> None:
    problem = bundle.build_needs_problem(pip_found, packaging_found)
    assert problem is not None and "\n" not in problem
    assert all(part in problem for part in says)
    assert "tox -e bundle -- build" in problem and "-m pip install 'pip>=26.0' packaging" in problem


def test_build_runs_with_what_it_needs(bundle) -> None:
    assert bundle.build_needs_problem("26.0", True) is None
    assert bundle.build_needs_problem("26.3.1", True) is None


def test_build_in_a_clean_venv_stops_with_one_line(tmp_path: Path) -> None:
    """The pip a fresh venv gets (ensurepip's: 23.2 on Python 3.11), no packaging."""
    import subprocess
    import venv

    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    (tmp_path / "pip-list.txt").write_text("torch==2.11.0\n")
    run = subprocess.run(
        [str(python), str(TOOL), "build", "--vllm", "0.32.0", "--machine-pip-list",
         str(tmp_path / "pip-list.txt"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("tools/gpu_bundle.py build needs ")
    assert not (tmp_path / "out").exists()  # stopped before it did anything


def test_tox_bundle_env_brings_what_build_needs(bundle) -> None:
    import configparser

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(TOOL.parents[1] / "tox.ini")
    deps = tox["testenv:bundle"]["deps"].split()
    assert bundle.BUILD_NEEDS in deps and "packaging" in deps
    assert "tools/gpu_bundle.py" in tox["testenv:bundle"]["commands"]

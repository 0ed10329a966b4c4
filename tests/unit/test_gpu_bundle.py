"""What ``tools/gpu_bundle.py`` packs: compiled files by content, unused parts left out."""

from __future__ import annotations

import importlib.util
import json
import sys
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


def test_unused_distributions_are_not_packed(bundle) -> None:
    pins = [("PyNvVideoCodec", "2.0.4"), ("openai", "2.8.0"), ("cryptography", "46.0.1")]
    kept, left_out = bundle.split_left_out(pins)
    assert kept == [("openai", "2.8.0")]
    assert set(left_out) == {"pynvvideocodec", "cryptography"}
    assert left_out["pynvvideocodec"]["version"] == "2.0.4"
    assert all(entry["why"] for entry in left_out.values())

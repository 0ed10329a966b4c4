"""Pack vLLM's Python and the wheels a GPU machine lacks; install them there without network.

The GPU platform needs no compiled vLLM file, so a CUDA machine without vLLM
and without network can run the whole GPU tier from a bundle made elsewhere:

    # where pip reaches PyPI (any OS with Python 3.10+):
    python tools/gpu_bundle.py build --vllm 0.32.0 --machine-pip-list gpu-pip-list.txt \\
        --python 3.12 --out .bundle/0.32.0
    # on the GPU machine (standard library only, no network):
    python tools/gpu_bundle.py install .bundle/0.32.0 --target /tmp/site
    export PYTHONPATH=/tmp/site

What goes in is computed, not hand-listed: the ``vllm`` wheel's own
requirements (``Requires-Dist``, markers evaluated for the GPU machine's
Python on Linux x86-64), minus every project the machine already has (its
``pip list``, either format), resolved by pip with the machine's versions as
constraints; then everything pip would add that the machine lacks. Torch is
never packed: the machine's own torch runs vLLM's Python (the point of a plain
``Platform``); packages vLLM imports on every path whose requirements pip
cannot resolve against the machine's torch (``MACHINE_TORCH_PACKAGES``) are
packed without their torch/CUDA requirements. From the vLLM wheel every file
is taken except machine code (recognised by its first bytes: ELF, Mach-O, PE,
CUDA fat binaries, whatever the name) and the parts in ``VLLM_LEFT_OUT``; the
distributions in ``DISTRIBUTIONS_LEFT_OUT`` (required by vLLM, imported by no
path of the GPU platform) are not installed. ``manifest.json`` lists
everything left out, why and how big. The result is one ``tar.xz`` (split into
parts of at most ``--part-mib`` MiB if it is larger) with checksums in the
manifest. Nothing of vLLM is committed: the bundle folder is ignored by git.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MANIFEST = "manifest.json"
ARCHIVE = "bundle.tar.xz"
# Compiled files are recognised by their first bytes, not their names (vLLM's
# 60 MB `vllm/vllm-rs` binary has no suffix): ELF, Mach-O (both byte orders, 32
# and 64 bit, universal), PE/COFF, and CUDA fat binaries.
COMPILED_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"MZ",
    b"\x50\xed\x55\xba",
)
# Parts of vLLM's wheel the GPU platform never reads, with why (into the manifest).
VLLM_LEFT_OUT = {
    "vllm/third_party/": (
        "C++/CUDA headers and the compiled kernels of vendored libraries (DeepGEMM, "
        "CUTLASS, FMHA) for vLLM's own CUDA kernels; its Python modules are kept"
    ),
    "vllm/benchmarks/": "vLLM's benchmark CLI (`vllm bench`), not an engine or serving path",
    "examples/": "notebook and script samples",
}
MANYLINUX_TAGS = (
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)


def canonical(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pip_list(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` from ``pip list`` or ``pip list --format=freeze`` output."""
    packages: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("Package", "---", "#")):
            continue
        if "==" in line:
            name, version = line.split("==", 1)
        else:
            fields = line.split()
            if len(fields) < 2:
                continue
            name, version = fields[0], fields[1]
        packages[canonical(name)] = version.strip()
    return packages


def _pip_target_flags(python: str) -> list[str]:
    flags = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for tag in MANYLINUX_TAGS:
        flags += ["--platform", tag]
    return flags


def wheel_requirements(wheel: Path, python: str) -> list[str]:
    """The wheel's unconditional requirements for CPython ``python`` on Linux x86-64."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as zf:
        metadata_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(metadata_name).decode()
    env = default_environment()
    env.update(
        python_version=python,
        python_full_version=f"{python}.0",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        extra="",
    )
    requirements = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or req.marker.evaluate(env):
            requirements.append(str(req))
    return requirements


# Packages vLLM imports at module level on every engine path (vllm.parser imports
# xgrammar) whose declared requirements cannot be resolved against the machine's
# torch/CUDA stack by pip, although they run on it: they are packed without their
# torch*/nvidia-*/triton requirements (the machine's own serve them).
MACHINE_TORCH_PACKAGES = ("xgrammar", "compressed-tensors")
MACHINE_STACK_PREFIXES = ("torch", "nvidia-", "triton")


def machine_stack_package(
    requirement: str, python: str, work: Path
) -> tuple[tuple[str, str], list[str]]:
    """``(name, version)`` of ``requirement``'s wheel, and its requirements the machine's
    torch/CUDA stack does not cover."""
    from packaging.requirements import Requirement

    download = work / "machine-stack"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(download),
         *_pip_target_flags(python), requirement],
        check=True,
    )  # fmt: skip
    name = canonical(Requirement(requirement).name)
    wheel = next(w for w in download.glob("*.whl") if canonical(w.name.split("-")[0]) == name)
    needs = [
        r
        for r in wheel_requirements(wheel, python)
        if not canonical(Requirement(r).name).startswith(MACHINE_STACK_PREFIXES)
    ]
    return (wheel.name.split("-")[0], wheel.name.split("-")[1]), needs


def _dry_run(
    requirements: list[str], constraints: Path, python: str, work: Path
) -> tuple[list[dict] | None, str]:
    """pip's resolution of ``requirements`` for the GPU machine: (installs, stderr)."""
    report = work / "report.json"
    cmd = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
        "--report", str(report), "--target", str(work / "unused"), "-c", str(constraints),
        *_pip_target_flags(python), *requirements,
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None, run.stderr
    return json.loads(report.read_text())["install"], ""


def resolve_missing(
    requirements: list[str], machine: dict[str, str], python: str, work: Path
) -> tuple[list[tuple[str, str]], list[str], dict[str, str]]:
    """Pins to add, requirements the machine meets, and requirements left out (with why).

    A requirement that cannot be resolved on its own against the machine's
    packages (in practice vLLM's compiled CUDA-kernel libraries, which pin
    another torch) is left out and reported: the template platform does not
    load them.
    """
    from packaging.requirements import Requirement

    satisfied = [r for r in requirements if canonical(Requirement(r).name) in machine]
    wanted = [r for r in requirements if canonical(Requirement(r).name) not in machine]
    stack_pins: list[tuple[str, str]] = []
    for req in list(wanted):
        if canonical(Requirement(req).name) in MACHINE_TORCH_PACKAGES:
            pin, needs = machine_stack_package(req, python, work)
            stack_pins.append(pin)
            wanted.remove(req)
            wanted.extend(n for n in needs if canonical(Requirement(n).name) not in machine)
    constraints = work / "machine-constraints.txt"
    constraints.write_text(
        "".join(f"{name}=={version.split('+', 1)[0]}\n" for name, version in machine.items())
    )
    left_out: dict[str, str] = {}
    while True:
        installs, stderr = _dry_run(wanted, constraints, python, work)
        if installs is not None:
            break
        conflict = re.search(r"Cannot install (.+?) because", stderr.replace("\n", " "))
        if conflict is None:
            raise SystemExit(f"pip could not resolve vLLM's requirements:\n{stderr}")
        named = {canonical(re.split(r"[\[=<>!~ ]", n.strip(), maxsplit=1)[0])
                 for n in re.split(r", | and ", conflict.group(1))}  # fmt: skip
        dropped = False
        for req in list(wanted):
            if canonical(Requirement(req).name) not in named:
                continue
            alone, why = _dry_run([req], constraints, python, work)
            if alone is None:
                wanted.remove(req)
                left_out[req] = why.strip().splitlines()[-1] if why.strip() else "unresolvable"
                dropped = True
        if not dropped:
            raise SystemExit(f"pip could not resolve vLLM's requirements:\n{stderr}")
    # Packages that need a torch* or nvidia-* package the machine does not have are
    # vLLM's compiled kernel and codec libraries (built for another torch or CUDA than
    # the machine's, never loaded by the template platform). Those whose torch/CUDA
    # needs the machine meets (xgrammar: vLLM imports it at module level) are kept.
    requires = {
        canonical(item["metadata"]["name"]): [
            canonical(Requirement(r).name) for r in item["metadata"].get("requires_dist", [])
        ]
        for item in installs
    }

    def closure(name: str) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(d for d in requires.get(current, []) if d in requires)
        return seen

    kept_roots = []
    for req in wanted:
        name = canonical(Requirement(req).name)
        binary = sorted(
            n for n in closure(name) if n.startswith(("torch", "nvidia-")) and n not in machine
        )
        if binary:
            left_out[req] = f"needs torch/CUDA packages the machine lacks ({', '.join(binary)})"
        else:
            kept_roots.append(name)
    needed = set().union(*(closure(n) for n in kept_roots)) if kept_roots else set()
    pins = sorted(
        [
            (item["metadata"]["name"], item["metadata"]["version"])
            for item in installs
            if canonical(item["metadata"]["name"]) in needed
            and canonical(item["metadata"]["name"]) not in machine
        ]
        + stack_pins
    )
    return pins, satisfied, left_out


def is_compiled(head: bytes) -> bool:
    """Whether a file starting with ``head`` is machine code (see ``COMPILED_MAGIC``)."""
    return head.startswith(COMPILED_MAGIC)


def vllm_left_out_reason(name: str, head: bytes) -> str | None:
    """Why ``name`` of vLLM's wheel stays out of the bundle, or None to pack it."""
    if is_compiled(head):
        return "compiled (machine code): the GPU platform loads no compiled vLLM file"
    for prefix, why in VLLM_LEFT_OUT.items():
        if name.startswith(prefix) and not (prefix == "vllm/third_party/" and name.endswith(".py")):
            return why
    return None


def extract_python_files(wheel: Path, site: Path) -> tuple[int, dict[str, dict[str, int]]]:
    """vLLM's files the GPU platform uses, and its dist-info, into ``site``.

    Returns the count of files packed and, per reason, the count and bytes of the
    files left out (for the manifest).
    """
    count = 0
    left_out: dict[str, dict[str, int]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            with zf.open(info) as f:
                head = f.read(8)
            why = vllm_left_out_reason(info.filename, head)
            if why is not None:
                entry = left_out.setdefault(why, {"files": 0, "bytes": 0})
                entry["files"] += 1
                entry["bytes"] += info.file_size
                continue
            zf.extract(info, site)
            count += 1
    return count, left_out


# Distributions vLLM requires that no path of the GPU platform imports (checked by
# tracing the modules every process of a demo and a `serve` run imports), left out
# of the bundle with why. Only large ones are worth the list.
DISTRIBUTIONS_LEFT_OUT = {
    "pynvvideocodec": (
        "NVIDIA video decoding for vLLM's video inputs (86 MB: codec libraries, an ffmpeg "
        "source tarball, notebook samples); the template serves text models"
    ),
    "fastsafetensors": (
        "GPU-direct weight loading, imported only with load_format='fastsafetensors'"
    ),
    "cryptography": "imported by no engine or serving path (15 MB of OpenSSL bindings)",
    "anthropic": (
        "the Anthropic Messages API client, imported only when /v1/messages is served a request"
    ),
}


def split_left_out(
    pins: list[tuple[str, str]],
) -> tuple[list[tuple[str, str]], dict[str, dict[str, str]]]:
    """``pins`` without ``DISTRIBUTIONS_LEFT_OUT``, and those left out with version and why."""
    kept = [(n, v) for n, v in pins if canonical(n) not in DISTRIBUTIONS_LEFT_OUT]
    left_out = {
        canonical(n): {"version": v, "why": DISTRIBUTIONS_LEFT_OUT[canonical(n)]}
        for n, v in pins
        if canonical(n) in DISTRIBUTIONS_LEFT_OUT
    }
    return kept, left_out


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = read_pip_list(Path(args.machine_pip_list))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if Path(args.vllm).is_file():
            wheel = Path(args.vllm)
        else:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d",
                 str(work), *_pip_target_flags(args.python), f"vllm=={args.vllm}"],
                check=True,
            )  # fmt: skip
            wheel = next(work.glob("vllm-*.whl"))
        version = wheel.name.split("-")[1]
        requirements = wheel_requirements(wheel, args.python)
        pins, satisfied, left_out = resolve_missing(requirements, machine, args.python, work)
        pins, dropped = split_left_out(pins)
        print(f"vllm {version}: {len(requirements)} requirements, {len(satisfied)} met by the "
              f"machine, {len(left_out)} left out, {len(pins)} wheels to add")  # fmt: skip
        site = work / "site"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--no-compile",
             "--target", str(site), *_pip_target_flags(args.python),
             *(f"{n}=={v}" for n, v in pins)],
            check=True,
        )  # fmt: skip
        files, vllm_left_out = extract_python_files(wheel, site)
        archive = work / ARCHIVE
        with tarfile.open(archive, "w:xz", preset=6) as tar:
            tar.add(site, arcname=".")
        for old in out.glob(f"{ARCHIVE}.part*"):
            old.unlink()
        part_bytes = args.part_mib << 20
        parts = []
        with archive.open("rb") as f:
            for index, chunk in enumerate(iter(lambda: f.read(part_bytes), b"")):
                part = out / f"{ARCHIVE}.part{index:02d}"
                part.write_bytes(chunk)
                parts.append({"name": part.name, "sha256": sha256(part), "bytes": len(chunk)})
        manifest = {
            "vllm": version,
            "python": args.python,
            "vllm_files": files,
            "vllm_left_out": vllm_left_out,
            "distributions_left_out": dropped,
            "added": [f"{n}=={v}" for n, v in pins],
            "met_by_machine": {
                r: machine[canonical(re.split(r"[ <>=!~;\[]", r, maxsplit=1)[0])] for r in satisfied
            },
            "left_out": left_out,
            "archive_sha256": sha256(archive),
            "parts": parts,
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p["bytes"] for p in parts) / (1 << 20)
    print(f"wrote {len(parts)} part(s), {total:.1f} MiB, to {out}")


def install(args: argparse.Namespace) -> None:
    """Join the parts, check them, extract into ``--target``. Standard library only."""
    bundle = Path(args.bundle)
    manifest = json.loads((bundle / MANIFEST).read_text())
    target = Path(args.target)
    missing = [p["name"] for p in manifest["parts"] if not (bundle / p["name"]).is_file()]
    if missing:
        sys.exit(f"bundle incomplete: {missing} missing in {bundle}")
    for part in manifest["parts"]:
        if sha256(bundle / part["name"]) != part["sha256"]:
            sys.exit(f"bundle part {part['name']} is corrupt (checksum differs)")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / ARCHIVE
        with archive.open("wb") as joined:
            for part in manifest["parts"]:
                with (bundle / part["name"]).open("rb") as f:
                    shutil.copyfileobj(f, joined)
        if sha256(archive) != manifest["archive_sha256"]:
            sys.exit("bundle archive checksum differs after joining the parts")
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(target, filter="data")
    print(f"installed vLLM {manifest['vllm']} Python + {len(manifest['added'])} wheels "
          f"into {target}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="make a bundle (needs pip and PyPI)")
    b.add_argument("--vllm", required=True, help="a vLLM version, or a path to a vllm wheel")
    b.add_argument("--machine-pip-list", required=True, help="`pip list` of the GPU machine")
    b.add_argument("--python", default="3.12", help="the GPU machine's Python (X.Y)")
    b.add_argument("--out", required=True)
    b.add_argument("--part-mib", type=int, default=60, help="largest part, in MiB")
    b.set_defaults(func=build)
    i = sub.add_parser("install", help="install a bundle (no network)")
    i.add_argument("bundle")
    i.add_argument("--target", required=True)
    i.set_defaults(func=install)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()

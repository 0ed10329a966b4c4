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
Python on Linux x86-64) and the tier's own tools (``TIER_REQUIREMENTS``),
minus every project the machine already has (its
``pip list``, either format), resolved by pip against the machine's packages
as installed (metadata-only stand-ins at the machine's versions: pip never
resolves the machine's torch and its CUDA wheels again); then everything pip
would add that the machine lacks. Torch is never packed: the machine's own
torch runs vLLM's Python (the point of a plain ``Platform``). vLLM's
requirements that build on torch or CUDA are its compiled kernel and codec
libraries and stay out, except the packages vLLM imports on every path
(``MACHINE_TORCH_PACKAGES``), packed without their torch/CUDA requirements;
a requirement pip cannot resolve on its own against the machine stays out with
pip's reason. From the vLLM wheel every file is taken except machine code
(recognised by its first bytes: ELF, Mach-O, PE, CUDA fat binaries, whatever
the name) and the parts in ``VLLM_LEFT_OUT``; the distributions in
``DISTRIBUTIONS_LEFT_OUT`` (required by vLLM, imported by no path of the GPU
platform) are not installed. ``manifest.json`` lists everything left out, why
and how big.

What ``build`` needs besides the standard library (``install`` needs nothing
else): pip 26.0 or newer (``--uploaded-prior-to``; Python 3.11 ships pip 23.2)
and ``packaging`` (requirements and markers of wheels) in the Python that runs
it. Without them it stops at once with one line saying what to install, or to
run it as ``tox -e bundle -- build ...``, an environment that brings both.

The build is reproducible: pip reads one index (``--index-url``), only files
uploaded before ``--uploaded-prior-to`` (default ``DEFAULT_UPLOADED_PRIOR_TO``),
and neither pip's configuration files nor the ``PIP_*`` variables that choose
what it finds (this machine's add local indexes, find-links and a constraint
file); the manifest records all three and pip's version. A resolution that
still fails stops with the projects pip backtracked on and the requirements
that brought them in. The result is one ``tar.xz`` (split into parts of at most
``--part-mib`` MiB if it is larger: by default it is one part whenever it
travels in one device call beside the project) with checksums in the
manifest. Nothing of vLLM is committed: the bundle folder is ignored by git.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

MANIFEST = "manifest.json"
# What the GPU tier runs besides vLLM, where the machine has none: ``vllm-template new``
# formats the plugins it writes with ruff (the serve stage generates one and runs its
# parity test). Resolved and packed like vLLM's own requirements.
TIER_REQUIREMENTS = ["ruff"]
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
# Every glibc minor up to the GPU machine's (2.35), not a sample: a wheel tagged
# only manylinux_2_18 (nvidia-nccl-cu13 2.28.9, which the machine's torch pins)
# is otherwise "not found" and sends pip's resolver backtracking without end.
MACHINE_GLIBC_MINOR = 35
MANYLINUX_TAGS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(MACHINE_GLIBC_MINOR, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
# What pip may find is fixed by the build's own options, not by the pip
# configuration of the machine that builds: pip config files are not read and of
# the PIP_* environment only these (transport, cache, prompts) pass through.
PIP_ENV_KEPT = (
    "PIP_CERT",
    "PIP_CLIENT_CERT",
    "PIP_PROXY",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_TIMEOUT",
    "PIP_RETRIES",
    "PIP_CACHE_DIR",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_NO_INPUT",
    "PIP_KEYRING_PROVIDER",
)
DEFAULT_INDEX_URL = "https://pypi.org/simple"
# Dependencies are resolved from files uploaded before this instant (pip's
# --uploaded-prior-to), so a build today and one next month pack the same wheels;
# the manifest records it. Move it forward on purpose, in a commit, after a build
# at the new date has been tried on the GPU machine. The vllm wheel itself is
# pinned by version and exempt.
DEFAULT_UPLOADED_PRIOR_TO = "2026-11-25T00:00:00Z"
# A device call carries 64 MiB; a bundle up to this size travels as one part
# beside the project's tracked files (about 6 MiB), a larger one in parts of this
# size (one call each).
PART_MIB = 56
# `build` needs pip with --uploaded-prior-to (pip 26.0) and packaging; tox -e bundle has both.
MIN_PIP = (26, 0)
BUILD_NEEDS = f"pip>={MIN_PIP[0]}.{MIN_PIP[1]}"
# One resolution that takes longer than this is reported, not waited for.
RESOLVE_TIMEOUT_S = 900


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


def pip_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment pip runs in: no config files, no PIP_* but ``PIP_ENV_KEPT``."""
    environ = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in environ.items() if not k.startswith("PIP_") or k in PIP_ENV_KEPT}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


@dataclass(frozen=True)
class Source:
    """Where pip looks: one index, files uploaded before a date, the machine's stubs."""

    python: str
    index_url: str = DEFAULT_INDEX_URL
    uploaded_prior_to: str | None = DEFAULT_UPLOADED_PRIOR_TO
    machine_wheels: Path | None = None

    def flags(self) -> list[str]:
        flags = [*_pip_target_flags(self.python), "--index-url", self.index_url]
        if self.uploaded_prior_to:
            flags += ["--uploaded-prior-to", self.uploaded_prior_to]
        if self.machine_wheels is not None:
            flags += ["--find-links", str(self.machine_wheels)]
        return flags


def pip(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``python -m pip ARGS`` in ``pip_env()``."""
    return subprocess.run([sys.executable, "-m", "pip", *args], env=pip_env(), **kwargs)


def target_environment(python: str) -> dict[str, str]:
    """Marker environment of CPython ``python`` on Linux x86-64 (the GPU machine)."""
    from packaging.markers import default_environment

    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
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
    return env


def wheel_requirements(wheel: Path, python: str) -> list[str]:
    """The wheel's unconditional requirements for CPython ``python`` on Linux x86-64."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as zf:
        metadata_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(metadata_name).decode()
    env = target_environment(python)
    requirements = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or req.marker.evaluate(env):
            requirements.append(str(req))
    return requirements


def requirement_name(requirement: str) -> str:
    from packaging.requirements import Requirement

    return canonical(Requirement(requirement).name)


def write_machine_wheels(machine: dict[str, str], folder: Path) -> dict[str, str]:
    """A metadata-only wheel per package of the machine, with no requirements.

    pip then takes the machine's packages as they are installed there, instead of
    resolving them again from the index with their own requirements (the machine's
    torch pins a dozen CUDA wheels; whether the index still serves each for these
    platform tags is no question for a bundle that packs none of them). Their
    version is the machine's, with a ``+machine`` local label so that pip prefers
    them to the index's file of the same version. Returns ``{name: constraint}``.
    """
    from packaging.version import InvalidVersion, Version

    folder.mkdir(parents=True, exist_ok=True)
    pins = {}
    for name, listed in machine.items():
        try:
            version = Version(listed)
        except InvalidVersion:
            continue
        stub = str(version) if version.local else f"{version}+machine"
        dist = re.sub(r"[-_.]+", "_", name)
        info = f"{dist}-{stub}.dist-info"
        with zipfile.ZipFile(folder / f"{dist}-{stub}-py3-none-any.whl", "w") as zf:
            zf.writestr(
                f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {stub}\n"
            )
            zf.writestr(
                f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            zf.writestr(f"{info}/RECORD", "")
        pins[name] = f"{name}=={version.public}"
    return pins


# Packages vLLM imports at module level on every engine path (vllm.parser imports
# xgrammar) although they build on torch: packed without their torch*/nvidia-*/
# triton requirements (the machine's own serve them), whatever torch they name.
MACHINE_TORCH_PACKAGES = ("xgrammar", "compressed-tensors")
MACHINE_STACK_PREFIXES = ("torch", "nvidia-", "triton")


def machine_stack_package(
    requirement: str, source: Source, work: Path
) -> tuple[tuple[str, str], list[str]]:
    """``(name, version)`` of ``requirement``'s wheel, and its requirements the machine's
    torch/CUDA stack does not cover."""
    download = work / "machine-stack"
    pip(
        ["download", "--no-deps", "--quiet", "-d", str(download), *source.flags(), requirement],
        check=True,
    )
    name = requirement_name(requirement)
    wheel = next(w for w in download.glob("*.whl") if canonical(w.name.split("-")[0]) == name)
    needs = [
        r
        for r in wheel_requirements(wheel, source.python)
        if not requirement_name(r).startswith(MACHINE_STACK_PREFIXES)
    ]
    return (wheel.name.split("-")[0], wheel.name.split("-")[1]), needs


class ResolutionError(SystemExit):
    """pip could not resolve vLLM's requirements; the message names the culprit."""


def _dry_run(
    requirements: list[str], constraints: Path, source: Source, work: Path
) -> tuple[list[dict] | None, str]:
    """pip's resolution of ``requirements`` for the GPU machine: (installs, pip's log)."""
    report = work / "report.json"
    report.unlink(missing_ok=True)
    cmd = [
        "install", "--dry-run", "--ignore-installed", "--report", str(report),
        "--target", str(work / "unused"), "-c", str(constraints), *source.flags(), *requirements,
    ]  # fmt: skip
    try:
        run = pip(cmd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = "".join(
            o.decode(errors="replace") if isinstance(o, bytes) else o
            for o in (e.stdout, e.stderr)
            if o
        )
        return None, f"{out}\nerror: pip did not finish resolving in {RESOLVE_TIMEOUT_S} s"
    if run.returncode != 0:
        return None, run.stdout + run.stderr
    return json.loads(report.read_text())["install"], ""


def conflict_named(log: str) -> set[str]:
    """The projects pip names in "Cannot install A, B and C because ...", canonical."""
    found = re.search(r"Cannot install (.+?) because", log.replace("\n", " "))
    if found is None:
        return set()
    return {
        canonical(re.split(r"[\[=<>!~ ;]", n.strip(), maxsplit=1)[0])
        for n in re.split(r", | and ", found.group(1))
        if n.strip()
    }


def backtracked(log: str) -> list[str]:
    """Projects pip looked at many versions of, or found none of: the usual culprits of a
    ``resolution-too-deep`` or a timeout."""
    names = re.findall(r"pip is (?:still )?looking at multiple versions of (\S+) to", log)
    names += re.findall(r"No matching distribution found for ([A-Za-z0-9._-]+)", log)
    return list(dict.fromkeys(canonical(n) for n in names))


def required_by(log: str, project: str) -> list[str]:
    """The top-level requirements through which pip collected ``project``
    ("Collecting torch>=2.8 (from instanttensor>=0.2.2)" names instanttensor)."""
    roots = []
    for line in log.splitlines():
        found = re.match(r"\s*Collecting ([A-Za-z0-9._-]+)[^(]*\(from (.+)\)\s*$", line)
        if found and canonical(found.group(1)) == project:
            chain = [c for c in found.group(2).split("->") if not c.startswith("-r ")]
            if chain:
                roots.append(canonical(re.split(r"[\[=<>!~ ;]", chain[-1], maxsplit=1)[0]))
    return list(dict.fromkeys(roots))


def pip_reason(log: str) -> str:
    """pip's explanation of a failure, in one line (for the manifest and messages)."""
    lines = [ln.strip() for ln in log.splitlines()]
    if "The conflict is caused by:" in lines:
        start = lines.index("The conflict is caused by:") + 1
        caused = []
        for ln in lines[start:]:
            if not ln:
                break
            caused.append(ln)
        return "conflict: " + "; ".join(caused)
    errors = [ln for ln in lines if ln.startswith(("ERROR:", "error:"))]
    return errors[0] if errors else (lines[-1] if lines else "pip failed")


def classify(
    installs: list[dict],
    wanted: list[str],
    machine: dict[str, str],
    python: str,
    unused: dict[str, str] | None = None,
) -> tuple[set[str], dict[str, str], dict[str, dict[str, str]]]:
    """Which of vLLM's ``wanted`` requirements to pack, given pip's resolution.

    Returns the distributions to pack (the closure of the kept requirements, less
    the machine's), why each requirement left out is, and the ``unused``
    distributions (default ``DISTRIBUTIONS_LEFT_OUT``) pip resolved but the bundle
    leaves out with what only they need. Requirements that build on torch or CUDA
    (a ``MACHINE_STACK_PREFIXES`` package in their closure) are vLLM's compiled
    kernel and codec libraries, which the GPU platform does not load.
    """
    from packaging.requirements import Requirement

    unused = DISTRIBUTIONS_LEFT_OUT if unused is None else unused
    env = target_environment(python)
    versions = {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}
    declared = {
        canonical(i["metadata"]["name"]): [
            Requirement(r) for r in i["metadata"].get("requires_dist", []) or []
        ]
        for i in installs
    }
    # An extra counts as active when anything in the resolution asks for it (pip's
    # report does not say which edge brought what).
    extras: dict[str, set[str]] = {name: {""} for name in declared}
    for req in [Requirement(r) for r in wanted] + [r for rs in declared.values() for r in rs]:
        extras.setdefault(canonical(req.name), {""}).update(req.extras)

    def active(req: Requirement, of: str) -> bool:
        return req.marker is None or any(
            req.marker.evaluate({**env, "extra": e}) for e in extras.get(of, {""})
        )

    requires = {
        name: [canonical(r.name) for r in reqs if active(r, name)]
        for name, reqs in declared.items()
    }

    def closure(name: str, skip: frozenset[str] = frozenset()) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen and current not in skip:
                seen.add(current)
                todo.extend(d for d in requires.get(current, []) if d in requires)
        return seen

    reached: set[str] = set()
    kept: set[str] = set()
    left_out: dict[str, str] = {}
    for spec in wanted:
        deps = closure(requirement_name(spec))
        stack = sorted(n for n in deps if n.startswith(MACHINE_STACK_PREFIXES))
        if stack:
            left_out[spec] = (
                f"builds on torch/CUDA ({', '.join(stack)}): a compiled kernel or codec "
                "library; the GPU platform loads none"
            )
            continue
        reached |= deps
        kept |= closure(requirement_name(spec), skip=frozenset(unused))
    dropped = {n: {"version": versions[n], "why": unused[n]} for n in sorted(reached & set(unused))}
    return {n for n in kept if n not in machine}, left_out, dropped


def resolve_missing(
    requirements: list[str], machine: dict[str, str], source: Source, work: Path
) -> tuple[list[tuple[str, str]], list[str], dict[str, str], dict[str, dict[str, str]]]:
    """Pins to add, requirements the machine meets, requirements left out (with why), and
    the ``DISTRIBUTIONS_LEFT_OUT`` pip resolved (with version and why).

    The machine's packages are given to pip as installed (``write_machine_wheels``).
    A requirement that cannot be resolved on its own against them is left out and
    reported; if pip still fails, the error names the projects it backtracked on and
    the requirements that brought them in.
    """
    satisfied = [r for r in requirements if requirement_name(r) in machine]
    wanted = [r for r in requirements if requirement_name(r) not in machine]
    stack_pins: list[tuple[str, str]] = []
    for req in list(wanted):
        if requirement_name(req) in MACHINE_TORCH_PACKAGES:
            pin, needs = machine_stack_package(req, source, work)
            stack_pins.append(pin)
            wanted.remove(req)
            wanted.extend(n for n in needs if requirement_name(n) not in machine)
    constraints = work / "machine-constraints.txt"
    pins = write_machine_wheels(machine, work / "machine-wheels")
    constraints.write_text("".join(f"{c}\n" for c in pins.values()))
    source = replace(source, machine_wheels=work / "machine-wheels")
    left_out: dict[str, str] = {}
    while True:
        installs, log = _dry_run(wanted, constraints, source, work)
        if installs is not None:
            break
        suspects = conflict_named(log)
        for project in backtracked(log):
            suspects.update(required_by(log, project) or [project])
        removed_any = False
        for req in [r for r in wanted if requirement_name(r) in suspects]:
            alone, why = _dry_run([req], constraints, source, work)
            if alone is None:
                wanted.remove(req)
                left_out[req] = pip_reason(why)
                removed_any = True
        if not removed_any:
            raise ResolutionError(resolution_failure(log, source))
    kept, unloaded, dropped = classify(installs, wanted, machine, source.python)
    left_out.update(unloaded)
    pins_out = sorted(
        [
            (item["metadata"]["name"], item["metadata"]["version"])
            for item in installs
            if canonical(item["metadata"]["name"]) in kept
        ]
        + stack_pins
    )
    return pins_out, satisfied, left_out, dropped


def resolution_failure(log: str, source: Source) -> str:
    """The error of a resolution that failed although each suspect resolves on its own:
    pip's reason, the projects it named or backtracked on and the requirements that
    brought them in, what to do."""
    culprits = [
        f"{c} (brought in by {', '.join(required_by(log, c))})" if required_by(log, c) else c
        for c in sorted(conflict_named(log)) + backtracked(log)
    ]
    tail = "\n".join(log.strip().splitlines()[-8:])
    return (
        f"pip could not resolve vLLM's requirements for the GPU machine (files uploaded before "
        f"{source.uploaded_prior_to or 'now'} from {source.index_url}): {pip_reason(log)}\n"
        f"Culprit: {'; '.join(culprits) if culprits else 'pip named no project'}; each of "
        "these resolves on its own against the machine, so none was left out.\n"
        "Pin the culprit (a constraint in tools/gpu_bundle.py) or build with an earlier "
        f"--uploaded-prior-to.\npip's last lines:\n{tail}"
    )


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


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pip_version() -> str:
    out = pip(["--version"], capture_output=True, text=True).stdout.split()
    return out[1] if len(out) > 1 else "unknown"


def outside_range(satisfied: list[str], machine: dict[str, str]) -> dict[str, str]:
    """vLLM's requirements the machine meets by name with a version outside their range
    (torch: the machine's own runs vLLM's Python, the point of a plain ``Platform``)."""
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion

    outside = {}
    for r in satisfied:
        req = Requirement(r)
        version = machine[canonical(req.name)]
        try:
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                outside[r] = version
        except InvalidVersion:
            outside[r] = version
    return outside


# Every member's time and owner in the archive: the same inputs give the same bytes.
ARCHIVE_MTIME = 1_577_836_800  # 2020-01-01


def write_archive(site: Path, archive: Path) -> None:
    """``site`` as a ``tar.xz`` whose bytes depend only on the files' names and contents."""

    def normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime = ARCHIVE_MTIME
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(archive, "w:xz", preset=6) as tar:  # add() walks folders sorted
        tar.add(site, arcname=".", filter=normalized)


def split_archive(archive: Path, out: Path, part_mib: int) -> list[dict]:
    """``archive`` into ``out`` as parts of at most ``part_mib`` MiB (one if it fits)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{ARCHIVE}.part*"):
        old.unlink()
    part_bytes = part_mib << 20
    parts = []
    with archive.open("rb") as f:
        for index, chunk in enumerate(iter(lambda: f.read(part_bytes), b"")):
            part = out / f"{ARCHIVE}.part{index:02d}"
            part.write_bytes(chunk)
            parts.append({"name": part.name, "sha256": sha256(part), "bytes": len(chunk)})
    return parts


def build_needs_problem(pip_found: str, packaging_found: bool) -> str | None:
    """One line saying what ``build`` lacks in this Python (``pip --version``'s version)."""
    try:
        pip_ok = tuple(int(p) for p in pip_found.split(".")[:2]) >= MIN_PIP
    except ValueError:
        pip_ok = False
    missing = ([] if pip_ok else [f"{BUILD_NEEDS} (found {pip_found}: no --uploaded-prior-to)"]) + (
        [] if packaging_found else ["packaging (not installed)"]
    )
    if not missing:
        return None
    return (
        f"tools/gpu_bundle.py build needs {' and '.join(missing)}: run `{sys.executable} -m pip "
        f"install '{BUILD_NEEDS}' packaging`, or `tox -e bundle -- build ...`"
    )


def build(args: argparse.Namespace) -> None:
    problem = build_needs_problem(pip_version(), importlib.util.find_spec("packaging") is not None)
    if problem is not None:
        sys.exit(problem)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine_list = Path(args.machine_pip_list)
    machine = read_pip_list(machine_list)
    source = Source(args.python, args.index_url, args.uploaded_prior_to or None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if Path(args.vllm).is_file():
            wheel = Path(args.vllm)
        else:  # pinned by version: exempt from --uploaded-prior-to
            pinned = replace(source, uploaded_prior_to=None)
            pip(["download", "--no-deps", "--quiet", "-d", str(work), *pinned.flags(),
                 f"vllm=={args.vllm}"], check=True)  # fmt: skip
            wheel = next(work.glob("vllm-*.whl"))
        version = wheel.name.split("-")[1]
        requirements = wheel_requirements(wheel, args.python) + TIER_REQUIREMENTS
        pins, satisfied, left_out, dropped = resolve_missing(requirements, machine, source, work)
        print(f"vllm {version}: {len(requirements)} requirements, {len(satisfied)} met by the "
              f"machine, {len(left_out)} left out, {len(pins)} wheels to add "
              f"({len(dropped)} unused left out)")  # fmt: skip
        site = work / "site"
        pip(["install", "--no-deps", "--quiet", "--no-compile", "--target", str(site),
             *source.flags(), *(f"{n}=={v}" for n, v in pins)], check=True)  # fmt: skip
        files, vllm_left_out = extract_python_files(wheel, site)
        archive = work / ARCHIVE
        write_archive(site, archive)
        parts = split_archive(archive, out, args.part_mib)
        manifest = {
            "vllm": version,
            "python": args.python,
            "resolved": {
                "index_url": source.index_url,
                "uploaded_prior_to": source.uploaded_prior_to,
                "pip": pip_version(),
                "machine_pip_list_sha256": sha256(machine_list),
                "note": "pip config files and PIP_* selection variables were not read",
            },
            "vllm_files": files,
            "vllm_left_out": vllm_left_out,
            "distributions_left_out": dropped,
            "added": [f"{n}=={v}" for n, v in pins],
            "met_by_machine": {r: machine[requirement_name(r)] for r in satisfied},
            "met_by_machine_outside_range": outside_range(satisfied, machine),
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


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="make a bundle (needs pip and PyPI)")
    b.add_argument("--vllm", required=True, help="a vLLM version, or a path to a vllm wheel")
    b.add_argument("--machine-pip-list", required=True, help="`pip list` of the GPU machine")
    b.add_argument("--python", default="3.12", help="the GPU machine's Python (X.Y)")
    b.add_argument("--out", required=True)
    b.add_argument(
        "--part-mib",
        type=int,
        default=PART_MIB,
        help=f"largest part, in MiB (default {PART_MIB}: one part whenever the bundle fits a "
        "device call beside the project)",
    )
    b.add_argument("--index-url", default=DEFAULT_INDEX_URL, help="the one index pip reads")
    b.add_argument(
        "--uploaded-prior-to",
        default=DEFAULT_UPLOADED_PRIOR_TO,
        help="resolve from files uploaded before this ISO 8601 instant (default "
        f"{DEFAULT_UPLOADED_PRIOR_TO}; '' for none: not reproducible)",
    )
    b.set_defaults(func=build)
    i = sub.add_parser("install", help="install a bundle (no network)")
    i.add_argument("bundle")
    i.add_argument("--target", required=True)
    i.set_defaults(func=install)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()

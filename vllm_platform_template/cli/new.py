"""``vllm-template new NAME``: start a plugin for a new device from this template.

Copies this project (package, tests, benchmarks, tools, docs, packaging) into
``--out`` (default ``./vllm-NAME``) and renames every identity consistently:

=====================================  ==================================
template                               NAME = acme
=====================================  ==================================
distribution ``vllm-platform-template``  ``vllm-acme``
package ``vllm_platform_template``       ``vllm_acme``
entry point / options key ``template``   ``acme``
device setting ``VLLM_TEMPLATE_DEVICE``  ``VLLM_ACME_DEVICE``
command ``vllm-template``                ``vllm-acme``
providers ``template_cpu`` ...           ``acme_cpu`` ...
ops ``torch.ops.template.*``             ``torch.ops.acme.*``
classes ``TemplateCpuPlatform`` ...      ``AcmeCpuPlatform`` ...
attention backend ``TEMPLATE_ATTN``      ``ACME_ATTN``
=====================================  ==================================

The reference backends are kept, so the new project installs and passes its
own tests at once; ``docs/porting-guide.md`` says what to change next.

``--device npu`` also adds the vendor's device the way every device is added:
one folder, ``devices/npu/``, copied from the GPU folder (the plain-``Platform``
shape) with the torch device renamed (``torch.cuda`` -> ``torch.npu``, device
type ``"npu"``, dispatch key ``PrivateUse1``, classes ``AcmeNpuPlatform`` ...),
and one line each in ``settings.DEVICE_PACKAGES``/``PLATFORM_QUALNAMES``. It
imports and registers (its IR provider reports the device missing until it
is there); what is CUDA-specific in it (Triton kernels, CUDA graphs, the
``__cuda_array_interface__`` views, NCCL) is the vendor's to replace.
"""

from __future__ import annotations

import argparse
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import vllm_platform_template

COPIED = ("vllm_platform_template", "tests", "benchmarks", "tools", "docs", ".ci")
COPIED_FILES = ("pyproject.toml", "tox.ini", "README.md", ".gitignore")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".venv"}
TEXT_SUFFIXES = {".py", ".toml", ".ini", ".md", ".txt", ".cfg", ".json", ".sh", ""}
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]{1,30}$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="short plugin name: lowercase letters and digits, e.g. acme")
    parser.add_argument("--out", type=Path, help="target directory (default ./vllm-NAME)")
    parser.add_argument(
        "--device",
        help="also add devices/DEVICE/ for your accelerator's torch device type (e.g. npu): "
        "the GPU folder with the device renamed, registered in settings.py",
    )


def project_root() -> Path:
    """The source tree of this template (``new`` copies from a clone, not from a wheel)."""
    root = Path(vllm_platform_template.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "vllm-platform-template"' not in pyproject.read_text():
        raise SystemExit(
            f"vllm-template new copies the project's source tree, which is not next to {root}. "
            "Run it from a clone installed with `pip install -e .` (the README's set-up does this)."
        )
    return root


def renamer(name: str) -> Callable[[str], str]:
    """A function that rewrites template identities to ``name`` in a text."""
    title = name.capitalize()
    upper = name.upper()
    replacements: list[tuple[re.Pattern[str], str]] = [
        (re.compile(r"vllm_platform_template"), f"vllm_{name}"),
        (re.compile(r"vllm-platform-template"), f"vllm-{name}"),
        (re.compile(r"VLLM_TEMPLATE_"), f"VLLM_{upper}_"),
        (re.compile(r"vllm-template"), f"vllm-{name}"),
        (re.compile(r"TEMPLATE_ATTN"), f"{upper}_ATTN"),
        # Our class names (TemplateCpuPlatform, ...), not tokenizers' TemplateProcessing.
        (re.compile(r"\bTemplate(?=[A-Z])(?!Processing)"), title),
        (re.compile(r"\btemplate_(?=[a-z])"), f"{name}_"),
        (re.compile(r"template::"), f"{name}::"),
        (re.compile(r"ops\.template\b"), f"ops.{name}"),
        (re.compile(r"vllm\.template\b"), f"vllm.{name}"),
        (re.compile(r"(['\"])template\1"), rf"\g<1>{name}\g<1>"),
        (re.compile(r"(['\"])template_\1"), rf"\g<1>{name}_\g<1>"),
        (re.compile(r"^template = ", re.MULTILINE), f"{name} = "),
    ]

    def rename(text: str) -> str:
        for pattern, replacement in replacements:
            text = pattern.sub(replacement, text)
        return text

    return rename


def _copy_tree(src: Path, dst: Path, rename: Callable[[str], str]) -> int:
    count = 0
    for path in sorted(src.rglob("*")):
        if SKIPPED_PARTS & set(path.parts) or path.is_dir():
            continue
        target = dst / rename(str(path.relative_to(src)))
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in TEXT_SUFFIXES:
            target.write_text(rename(path.read_text()))
            target.chmod(path.stat().st_mode)
        else:
            shutil.copy2(path, target)
        count += 1
    return count


def device_renamer(plugin: str, device: str) -> Callable[[str], str]:
    """Rewrites the (already renamed) GPU folder's device identities to ``device``."""
    title, dev_title, dev_upper = plugin.capitalize(), device.capitalize(), device.upper()
    replacements: list[tuple[re.Pattern[str], str]] = [
        (re.compile(r"devices([./])gpu\b"), rf"devices\g<1>{device}"),
        (re.compile(rf"\b{title}GPU(?=[A-Z])"), f"{title}{dev_upper}"),
        (re.compile(rf"\b{title}Gpu(?=[A-Z])"), f"{title}{dev_title}"),
        (re.compile(rf"\b{plugin}_triton\b"), f"{plugin}_{device}"),
        (re.compile(r"torch\.cuda\b"), f"torch.{device}"),
        (re.compile(r"(\w+)\.is_cuda\b"), rf'\g<1>.device.type == "{device}"'),
        (re.compile(r'dispatch_key = "CUDA"'), 'dispatch_key = "PrivateUse1"'),
        (re.compile(r'"CUDA_VISIBLE_DEVICES"'), f'"{dev_upper}_VISIBLE_DEVICES"'),
        (re.compile(r'ray_device_key = "GPU"'), f'ray_device_key = "{dev_upper}"'),
        (re.compile(r'name="gpu"'), f'name="{device}"'),
        (re.compile(r"([\"'])cuda\1"), rf"\g<1>{device}\g<1>"),
        (re.compile(rf"{title.upper()}_DEVICE=cuda"), f"{title.upper()}_DEVICE={device}"),
    ]

    def rename(text: str) -> str:
        for pattern, replacement in replacements:
            text = pattern.sub(replacement, text)
        return text

    return rename


GENERATED_NOTE = (
    "Generated by ``vllm-{plugin} new --device {device}`` from the GPU folder, with the\n"
    "torch device renamed: nothing here has run on a {device}. Replace what is CUDA's\n"
    "(Triton kernels, CUDA graphs, ``__cuda_array_interface__`` views, NCCL) with your\n"
    "device's, following docs/porting-guide.md.\n\n"
)


def _register_device(settings: Path, plugin: str, device: str) -> None:
    """Add ``device`` to the generated ``settings.DEVICE_PACKAGES``/``PLATFORM_QUALNAMES``."""
    text = settings.read_text()
    anchors = {
        '    "xpu": f"{PACKAGE}.devices.xpu",\n': (
            f'    "{device}": f"{{PACKAGE}}.devices.{device}",\n'
        ),
        '    "xpu": f"{DEVICE_PACKAGES[\'xpu\']}.platform.'
        + f'{plugin.capitalize()}XpuPlatform",\n': (
            f'    "{device}": f"{{DEVICE_PACKAGES[\'{device}\']}}.platform.'
            f'{plugin.capitalize()}{device.capitalize()}Platform",\n'
        ),
    }
    for anchor, line in anchors.items():
        if anchor not in text:
            raise SystemExit(f"{settings}: cannot find {anchor.strip()!r} to register {device}")
        text = text.replace(anchor, anchor + line)
    settings.write_text(text)


def add_device(package_dir: Path, plugin: str, device: str) -> Path:
    """Add ``devices/<device>/`` (from the GPU folder) to a generated package, registered."""
    if not NAME_PATTERN.match(device) or device in ("cpu", "cuda", "gpu", "xpu"):
        raise SystemExit(
            f"invalid device {device!r}: your torch device type, 2-31 lowercase letters/digits, "
            "not one of the reference devices (cpu, cuda, gpu, xpu)"
        )
    dst = package_dir / "devices" / device
    _copy_tree(package_dir / "devices" / "gpu", dst, device_renamer(plugin, device))
    init = dst / "__init__.py"
    note = GENERATED_NOTE.format(plugin=plugin, device=device)
    init.write_text(init.read_text().replace('"""', '"""' + note, 1))
    _register_device(package_dir / "settings.py", plugin, device)
    return dst


def generate(name: str, out: Path, device: str | None = None) -> Path:
    """Write the new project to ``out`` (and ``devices/<device>/`` if given); returns it."""
    if not NAME_PATTERN.match(name) or name == "template":
        raise SystemExit(
            f"invalid name {name!r}: use 2-31 lowercase letters/digits, starting with a letter"
        )
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not empty; choose another --out")
    root = project_root()
    rename = renamer(name)
    out.mkdir(parents=True, exist_ok=True)
    files = 0
    for entry in COPIED:
        if (root / entry).exists():
            files += _copy_tree(root / entry, out / rename(entry), rename)
    for entry in COPIED_FILES:
        if (root / entry).exists():
            (out / entry).write_text(rename((root / entry).read_text()))
            files += 1
    if device is not None:
        folder = add_device(out / rename("vllm_platform_template"), name, device)
        print(f"added the device folder {folder.relative_to(out)}")
    print(f"wrote {files} files to {out}")
    return out


def main(args: argparse.Namespace) -> int:
    out = generate(args.name, args.out or Path(f"vllm-{args.name}"), args.device)
    print(
        f"next: cd {out} && python -m pip install tox && tox -e test   "
        "(then follow docs/porting-guide.md)"
    )
    return 0

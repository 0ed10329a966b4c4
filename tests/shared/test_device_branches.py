"""No code outside the device folders branches on a device by name.

Each device's differences live in its folder (``devices/<name>/``) and reach the
shared layers and the command line through the device object (``TemplateDevice``)
and the folders' registry; a comparison with a device type's name anywhere else
is a device branch that the next port would have to find and edit. This test reads
the AST of every module of the package outside ``devices/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vllm_platform_template

PACKAGE_DIR = Path(vllm_platform_template.__file__).resolve().parent
# torch's device type names and the device folders' names: a comparison with one is a branch
DEVICE_NAMES = {"cpu", "cuda", "gpu", "xpu", "npu", "hpu", "tpu", "mps", "privateuseone"}
# vLLM's build-target variable: VLLM_TARGET_DEVICE=cpu makes vLLM skip every platform
# plugin, which the command line tells the user; that compares vLLM's setting, not a device.
NOT_A_DEVICE_BRANCH = "VLLM_TARGET_DEVICE"


def device_branches(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each comparison of a value with a device type's name."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        names = set()
        for operand in operands:
            elements = (
                operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            )
            names |= {
                e.value.lower()
                for e in elements
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
        code = ast.get_source_segment(source, node) or ""
        if names & DEVICE_NAMES and NOT_A_DEVICE_BRANCH not in code:
            found.append((node.lineno, code))
    return found


def test_no_device_branch_outside_the_device_folders() -> None:
    branches = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR)
        if relative.parts[0] == "devices":
            continue
        for line, code in device_branches(path.read_text()):
            branches.append(f"{relative}:{line}: {code}")
    assert branches == [], "move the difference into the device folder:\n" + "\n".join(branches)


def test_the_check_finds_a_device_branch() -> None:
    """A test that cannot fail is a defect: each form of branch is found."""
    source = (
        'if device == "cpu": pass\n'
        'if args.device != "CUDA": pass\n'
        'ok = kind in ("xpu", "npu")\n'
        'skip = os.environ.get("VLLM_TARGET_DEVICE") == "cpu"\n'
        'fine = mode == "NONE"\n'
    )
    assert [line for line, _ in device_branches(source)] == [1, 2, 3]

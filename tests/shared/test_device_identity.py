"""The GPU folder's identity table, its two tiers and what the entry point makes of them.

``devices/gpu/identity.py`` is the one place the folder names its device: no
other file of the folder spells a value of the table (or of its first device's). The folder's
hooks are in two tiers, named once (``availability.HOOKS``): first light, then
speed; docs/porting-guide.md follows them.
The entry point (``availability.problem``) refuses a device whose first-light hook
lacks its runtime API, or whose named API is not present on the machine, and
names each such hook with its section of the guide; a speed hook the table
leaves out runs its first-light part instead (``first_light_parts``). A fake
torch device module stands in for the device, so this runs without one.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import torch

from vllm_platform_template.devices.gpu import availability
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY, DeviceIdentity
from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
    ERROR_QUALNAME,
    PLATFORM_QUALNAMES,
    select_platform,
)

FOLDER = Path(availability.__file__).parent
ROOT = FOLDER.parents[2]
GUIDE = ROOT / "docs" / "porting-guide.md"
HOOK_FIELDS = sorted({hook.field for hook in availability.HOOKS if hook.field is not None})
# What the folder was written for: none of it may be spelled outside identity.py.
CUDA_SPELLINGS = {"cuda", "CUDA", "nccl", "CUDA_VISIBLE_DEVICES", "CUDAGraph"}


def _identity_values() -> set[str]:
    fields = ("device_type", "torch_module", "dispatch_key", "dist_backend", "graph_api")
    values = {getattr(IDENTITY, f) for f in (*fields, "visible_devices_env", "ray_device_key")}
    # torch's device-neutral graphs (torch.accelerator) name no device
    return {v for v in values if v and v != ACCELERATOR_GRAPH} | CUDA_SPELLINGS


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    return {
        id(node.body[0].value)  # type: ignore[attr-defined]
        for node in nodes
        if node.body and isinstance(node.body[0], ast.Expr)  # type: ignore[attr-defined]
    }


def _spellings(path: Path) -> list[str]:
    """The identity spellings in ``path``'s code (strings, ``torch.<x>``, ``.is_<x>``)."""
    tree = ast.parse(path.read_text())
    docstrings, values, found = _docstrings(tree), _identity_values(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and node.value in values:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
        elif isinstance(node, ast.Attribute):
            torch_attr = isinstance(node.value, ast.Name) and node.value.id == "torch"
            if (torch_attr and node.attr in values) or node.attr == f"is_{IDENTITY.device_type}":
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_only_the_identity_table_names_the_device() -> None:
    files = sorted(p for p in FOLDER.rglob("*.py") if p.name != "identity.py")
    assert len(files) >= 5
    assert [s for p in files for s in _spellings(p)] == []


def test_the_spelling_check_finds_a_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""cuda in a docstring is prose."""\n'
        f"x = torch.{IDENTITY.torch_module}.current_device()\n"
        f"y = {IDENTITY.device_type!r}\n"
    )
    assert len(_spellings(sample)) == 2


def test_every_file_of_the_folder_names_its_vllm_hook_and_its_test() -> None:
    unnamed = []
    for path in sorted(FOLDER.rglob("*.py")):
        name = path.relative_to(FOLDER)
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        tests = re.findall(r"tests/[\w/]+\.py", doc)
        if "vLLM hook" not in doc or not tests:
            unnamed.append(f"{name}: hook or test missing")
        unnamed += [f"{name}: no {t}" for t in tests if not (ROOT / t).is_file()]
    assert unnamed == []


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.MULTILINE)


def test_every_hook_names_a_section_of_the_porting_guide_in_tier_order() -> None:
    sections = _sections(GUIDE.read_text())
    missing = [hook.section for hook in availability.HOOKS if hook.section not in sections]
    assert missing == [], f"docs/porting-guide.md has no sections {missing}; it has {sections}"
    ordered = [s for s in sections if s in {hook.section for hook in availability.HOOKS}]
    assert ordered == [hook.section for hook in availability.HOOKS]


def test_the_tiers_come_in_order_first_light_then_speed() -> None:
    tiers = [hook.tier for hook in availability.HOOKS]
    assert set(tiers) == set(availability.TIERS)
    assert tiers == sorted(tiers, key=availability.TIERS.index)
    numbers = [int(hook.section.split(".")[0]) for hook in availability.HOOKS]
    assert numbers == list(range(1, len(availability.HOOKS) + 1))
    # a speed hook the table may leave out says what runs in its place
    assert all(h.without for h in availability.HOOKS if h.tier == availability.SPEED and h.field)


def test_every_hook_names_files_of_the_folder() -> None:
    files = {f.strip("/") for hook in availability.HOOKS for f in hook.files.split(", ")}
    assert [f for f in files if not (FOLDER / f).exists()] == []


def _fake_device(**api: object) -> SimpleNamespace:
    return SimpleNamespace(is_available=lambda: True, device_count=lambda: 1, **api)


def _fake_identity(**fields: object) -> DeviceIdentity:
    return dataclasses.replace(IDENTITY, device_type="fakedev", torch_module="fakedev", **fields)


def test_a_device_torch_does_not_see_is_refused_with_what_to_do() -> None:
    message = availability.problem(None, _fake_identity())
    assert message is not None
    assert f"{DEVICE_ENV}=fakedev" in message and "sees no fakedev device" in message
    others = [d for d in PLATFORM_QUALNAMES if d != "fakedev"]
    assert all(f"{DEVICE_ENV}={d}" in message for d in others)


def test_a_first_light_hook_without_its_api_is_refused_a_speed_hook_is_not(monkeypatch) -> None:
    monkeypatch.setattr(torch, "fakedev", _fake_device(), raising=False)
    identity = _fake_identity(**dict.fromkeys(HOOK_FIELDS))
    message = availability.problem(None, identity)
    assert message is not None and "sees no" not in message
    lines = message.splitlines()[1:]
    refused = [h for h in availability.HOOKS if h.field and h.tier == availability.FIRST_LIGHT]
    assert refused and len(lines) == len(refused)
    for hook, line in zip(refused, lines, strict=True):
        assert hook.name in line and hook.section in line and hook.files in line
        assert f"names no {hook.field} for fakedev" in line
    parts = availability.first_light_parts(identity)
    speed = [h for h in availability.HOOKS if h.field and h.tier == availability.SPEED]
    assert speed and len(parts) == len(speed)
    for hook, part in zip(speed, parts, strict=True):
        assert hook.name in part and hook.without in part and hook.section in part


def test_a_device_with_only_first_light_apis_activates(monkeypatch) -> None:
    monkeypatch.setattr(torch, "fakedev", _fake_device(), raising=False)
    first_light = {h.field for h in availability.HOOKS if h.field and h.tier == "first light"}
    identity = _fake_identity(**{f: "gloo" if f in first_light else None for f in HOOK_FIELDS})
    assert availability.problem(None, identity) is None
    assert len(availability.first_light_parts(identity)) == len(
        [h for h in availability.HOOKS if h.field and h.tier == availability.SPEED]
    )


def test_a_named_api_missing_on_the_machine_is_named(monkeypatch) -> None:
    monkeypatch.setattr(torch, "fakedev", _fake_device(graph=None), raising=False)
    identity = _fake_identity(
        dist_backend="no-such-backend",
        graph_api="FakeGraph",
        kernel_compiler="no_such_kernel_compiler",
        array_interface="__fake_array_interface__",
    )
    message = availability.problem(None, identity)
    assert message is not None
    assert "no torch.distributed backend 'no-such-backend'" in message
    assert "no_such_kernel_compiler is not installed" in message
    assert "pinned / UVA" not in message  # nothing to check on the machine for views
    assert "FakeGraph" not in message  # no refusal: the platform runs without graphs


def test_a_named_graph_api_the_device_lacks_turns_graphs_off(monkeypatch) -> None:
    """Graphs have an exact eager equivalent: a graph API the table names and the device's
    extension does not offer is no refusal, but no graph API for the platform, with why."""
    monkeypatch.setattr(torch, "fakedev", _fake_device(graph=None), raising=False)
    identity = _fake_identity(dist_backend="gloo", graph_api="FakeGraph", kernel_compiler="torch")
    availability.graph_api.cache_clear()
    assert availability.problem(None, identity) is None
    assert availability.graph_api(identity) is None
    assert availability.graph_api_problem(identity) == "torch.fakedev has no FakeGraph and graph()"
    monkeypatch.setattr(torch, "fakedev", _fake_device(FakeGraph=object, graph=object))
    availability.graph_api.cache_clear()
    assert availability.graph_api(identity) == "FakeGraph"
    availability.graph_api.cache_clear()


def test_a_device_with_every_api_activates(monkeypatch) -> None:
    monkeypatch.setattr(
        torch, "fakedev", _fake_device(FakeGraph=object, graph=object), raising=False
    )
    identity = _fake_identity(
        dist_backend="gloo",
        graph_api="FakeGraph",
        kernel_compiler="torch",  # an importable stand-in
        array_interface="__fake_array_interface__",
    )
    assert availability.problem(None, identity) is None


def test_activation_names_exactly_the_first_light_hooks_this_table_leaves_out(monkeypatch) -> None:
    """The entry point on a machine where the device and every named API are present."""
    monkeypatch.setattr(torch, IDENTITY.torch_module, _fake_device(), raising=False)
    present = [dataclasses.replace(h, missing_here=lambda *a: None) for h in availability.HOOKS]
    monkeypatch.setattr(availability, "HOOKS", tuple(present))
    selection = select_platform({DEVICE_ENV: IDENTITY.device_type})
    left_out = [
        hook
        for hook in present
        if hook.field
        and hook.tier == availability.FIRST_LIGHT
        and getattr(IDENTITY, hook.field) is None
    ]
    if not left_out:
        assert selection.qualname == PLATFORM_QUALNAMES[IDENTITY.device_type]
        return
    assert selection.qualname == ERROR_QUALNAME
    assert selection.problem is not None
    assert [h.section for h in left_out if h.section in selection.problem] == [
        h.section for h in left_out
    ]
    assert len(selection.problem.splitlines()) == 1 + len(left_out)

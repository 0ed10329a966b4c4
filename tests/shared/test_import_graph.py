"""The package's imports flow one way (README, "Architecture"): checked from the source.

Every ``import`` of the package, at module level or inside a function, is an
edge from its subpackage to the imported one. The graph must have no cycle,
every edge must go to the same or a lower layer, ``settings`` must import
nothing of the plugin, vLLM or torch, and the kernel layer must not import vLLM.

Device folders (``devices/<name>``) sit above the shared platform hooks, which
their platforms import. The layers below reach a device only through
``device.device_for`` (by package name, as vLLM resolves platforms), which
loads ``devices/<name>/device.py``; so that module, and everything it imports,
must import neither vLLM nor any layer above the device API.

The tools (``vllm_platform_template_tools``: the command line, the embedded model,
the conformance kit) import the plugin as a user would; the plugin never imports them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
import tomllib

import vllm_platform_template
from vllm_platform_template import device_registry, settings

PACKAGE = "vllm_platform_template"
PACKAGE_DIR = Path(vllm_platform_template.__file__).parent
REPO = PACKAGE_DIR.parent

# Lower numbers are lower layers; an import may only go to its own layer or below.
LAYERS = {
    "settings": 0,
    "log": 0,
    "after_import": 0,
    "process_exit": 0,
    "shutdown": 0,
    "device_registry": 0,
    "reference_kernels": 1,
    "device": 2,
    "patches": 3,
    "compiler": 3,
    "graph_wrapper": 3,
    "attention": 3,
    "ir_impls": 3,
    "custom_ops": 3,
    "quantization": 3,
    "moe": 3,
    "lora": 3,
    "reporting": 3,
    "models": 4,
    "platform_hooks": 5,
    "devices": 6,
    "<root>": 7,
}
DEVICE_API_LAYER = LAYERS["device"]
# modules of a device folder that belong to the platform layer (they import vLLM)
PLATFORM_MODULES = {"platform", "worker", "fast_paths", "communicator", "graph_capture"}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


@functools.cache
def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        if "tests" in path.relative_to(PACKAGE_DIR).parts:
            continue
        parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(module: str, path: Path) -> set[str]:
    """Absolute names of everything ``module`` imports (resolving relative imports)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one.
            submodules = {f"{source}.{alias.name}" for alias in node.names} & set(_modules())
            names.update(submodules or {source})
    return names


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in _modules().items():
        for name in _imports(module, path):
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                src, dst = _unit(module), _unit(name)
                if src != dst:
                    edges.setdefault(src, set()).add(dst)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in edges.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_between_subpackages() -> None:
    assert _cycles(_edges()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_subpackage_has_a_layer() -> None:
    units = {_unit(module) for module in _modules()}
    assert units <= set(LAYERS), "place new subpackages in LAYERS (and the README table)"
    # a plugin made by `vllm-template new` may leave these out (the first-light shape:
    # cli/new.py's FIRST_LIGHT_LEFT_OUT: the hand-fused model)
    assert set(LAYERS) - units <= {"models"}, set(LAYERS) - units


@pytest.mark.parametrize("src", sorted(LAYERS))
def test_imports_flow_down(src: str) -> None:
    upward = {dst for dst in _edges().get(src, ()) if LAYERS[dst] > LAYERS[src]}
    assert not upward, f"{src} (layer {LAYERS[src]}) imports higher layers {sorted(upward)}"


def test_settings_is_a_leaf() -> None:
    names = _imports(f"{PACKAGE}.settings", PACKAGE_DIR / "settings.py")
    assert not {n for n in names if n.split(".")[0] in (PACKAGE, "vllm", "torch")}
    assert "import_module" not in (PACKAGE_DIR / "settings.py").read_text()


def test_the_registry_imports_the_standard_library_alone() -> None:
    names = _imports(f"{PACKAGE}.device_registry", PACKAGE_DIR / "device_registry.py")
    assert not {n for n in names if n.split(".")[0] in (PACKAGE, "vllm", "torch")}


def _dynamic_imports(path: Path) -> list[str]:
    """The argument of every ``import_module(...)`` call in ``path``, as source text."""
    text = path.read_text()
    return [
        ast.get_source_segment(text, node.args[0]) or ""
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
        and node.args
    ]


def _names_a_device_folder(argument: str) -> bool:
    """A folder's package from the registry (``DEVICE_PACKAGES[...]``, a ``package`` of its
    values) or the devices package by name."""
    return "devices" in argument or "DEVICE" in argument or "{package}" in argument


def test_only_the_registry_reaches_a_device_folder_by_name() -> None:
    """Shared code loads a device folder's module through ``device_registry.folder_module``; its own
    ``import_module`` calls name modules of the shared layers."""
    by_name = {
        str(path.relative_to(PACKAGE_DIR)): found
        for module, path in _modules().items()
        if _unit(module) not in ("devices", "device_registry")
        and (found := [a for a in _dynamic_imports(path) if _names_a_device_folder(a)])
    }
    assert by_name == {}


def test_the_dynamic_import_check_finds_a_device_folder_by_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import importlib\nimportlib.import_module(f'{DEVICE_PACKAGES[d]}.patches')\n"
    )
    assert _dynamic_imports(module) == ["f'{DEVICE_PACKAGES[d]}.patches'"]


def test_kernels_do_not_import_vllm() -> None:
    offenders = {
        module: sorted(n for n in _imports(module, path) if n.split(".")[0] == "vllm")
        for module, path in _modules().items()
        if _unit(module) in ("reference_kernels", "device")
    }
    assert {m: n for m, n in offenders.items() if n} == {}


def _closure(module: str) -> set[str]:
    """``module`` and every package module it imports, transitively."""
    modules = _modules()
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current in seen or current not in modules:
            continue
        seen.add(current)
        todo.extend(_imports(current, modules[current]))
    return seen


@pytest.mark.parametrize("package", sorted(device_registry.DEVICE_PACKAGES.values()))
def test_device_objects_stay_below_the_platforms(package: str) -> None:
    closure = _closure(f"{package}.device")
    assert f"{package}.device" in closure
    above = sorted(
        m for m in closure if _unit(m) != "devices" and LAYERS[_unit(m)] > DEVICE_API_LAYER
    )
    assert not above, f"{package}.device reaches layers above the device API: {above}"
    platform_modules = sorted(m for m in closure if m.rsplit(".", 1)[-1] in PLATFORM_MODULES)
    assert not platform_modules, platform_modules
    vllm_users = sorted(
        m for m in closure if any(n.split(".")[0] == "vllm" for n in _imports(m, _modules()[m]))
    )
    assert not vllm_users, f"{package}.device reaches modules importing vLLM: {vllm_users}"


def test_every_device_folder_is_registered() -> None:
    folders = {p.name for p in (PACKAGE_DIR / "devices").iterdir() if (p / "device.py").is_file()}
    registered = {name.rsplit(".", 1)[-1] for name in device_registry.DEVICE_PACKAGES.values()}
    assert folders == registered


def test_plugin_version_matches_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert settings.PLUGIN_VERSION == project["version"] == vllm_platform_template.__version__


TOOLS = "vllm_platform_template_tools"


def test_the_plugin_never_imports_its_tools() -> None:
    """What vLLM loads is the plugin alone: no module of it imports the tools package."""
    offenders = {
        module: sorted(n for n in _imports(module, path) if n.split(".")[0] == TOOLS)
        for module, path in _modules().items()
    }
    assert {m: names for m, names in offenders.items() if names} == {}
    sources = "\n".join(path.read_text() for path in _modules().values())
    assert TOOLS not in sources  # not by name either (importlib, strings)

"""Whether this machine can run this folder's device, and in which tier: read by the entry point.

vLLM hook served: the ``vllm.platform_plugins`` entry point
(``platform_hooks.entry_point``) asks before it names the platform class, in
every vLLM process, so nothing here imports vLLM or this folder's kernels.

:data:`HOOKS` is the folder's hooks in two tiers, the one place they are named
(docs/porting-guide.md follows it, section by section):

- *first light* (:data:`FIRST_LIGHT`): what a device needs to generate its first
  token through vLLM - identity, entry point, platform, worker, communicator,
  the reference (plain torch) kernels and attention, eager mode;
- *speed* (:data:`SPEED`): the device's own kernels and IR providers, custom
  ops, attention kernels, compiler passes, graph capture, Model Runner V2, the
  hand-written model, Ray.

Two checks, both read from ``identity.py``:

- the device: ``torch.<module>`` exists and sees one;
- each hook built on a runtime API (an identity field): a first-light hook's
  API must be named and present (the ``torch.distributed`` backend built); a
  speed hook's API, when named, must be present on a machine with the device
  (the kernel compiler installed). A speed hook whose API the table leaves out
  (``None``) is no refusal: the platform runs that part in first light
  (:attr:`Hook.without`, :func:`first_light_parts`). Nor is a named graph API the
  extension lacks: the platform runs eagerly instead and warns (:func:`graph_api`).

Every problem is reported at once, each naming the hook, its files and its
section of docs/porting-guide.md, so a port sees its whole list at the first
run instead of an error at some later import. Proven on any machine, with a
fake device module, by ``tests/shared/test_device_identity.py``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY, DeviceIdentity
from vllm_platform_template.settings import DEVICE_ENV

FOLDER = f"devices/{Path(__file__).parent.name}"
GUIDE = "docs/porting-guide.md"
FIRST_LIGHT = "first light"
SPEED = "speed"
TIERS = (FIRST_LIGHT, SPEED)


def _kernel_compiler_missing(identity: DeviceIdentity, name: str, module: Any) -> str | None:
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed (`pip install {name}`)"
    return None


def _dist_backend_missing(identity: DeviceIdentity, name: str, module: Any) -> str | None:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_backend_available(name)):
        return f"this torch has no torch.distributed backend {name!r}"
    return None


def _graph_api_missing(identity: DeviceIdentity, name: str, module: Any) -> str | None:
    if name == ACCELERATOR_GRAPH:  # torch >= 2.13; the device's extension registers one
        import torch

        try:
            torch.accelerator.Graph()
        except (AttributeError, RuntimeError) as error:
            return f"no torch.accelerator.Graph for {identity.device_type} here ({error})"
        return None
    if not (hasattr(module, name) and hasattr(module, "graph")):
        return f"torch.{identity.torch_module} has no {name} and graph()"
    return None


def _nothing_to_check(identity: DeviceIdentity, name: str, module: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Hook:
    """One hook of this folder: its tier, files, guide section and the API it is built on."""

    name: str
    files: str
    tier: str
    """:data:`FIRST_LIGHT` or :data:`SPEED`."""
    section: str
    """Its section of docs/porting-guide.md."""
    field: str | None = None
    """The identity field naming the runtime API it is built on (None: none)."""
    missing_here: Callable[[DeviceIdentity, str, Any], str | None] = _nothing_to_check
    """``(identity, api, torch_module) -> problem``: the named API is absent on this machine."""
    without: str = ""
    """A speed hook whose API the table leaves out: what runs instead (first light)."""
    refused_when_absent: bool = True  # False: a named API absent here runs `without`


HOOKS = (
    Hook("identity", "identity.py", FIRST_LIGHT, "1. Identity"),
    Hook("entry point (vllm.platform_plugins)", "availability.py", FIRST_LIGHT, "2. Entry point"),
    Hook(
        "platform: device queries, memory, set_device, seeding",
        "platform.py",
        FIRST_LIGHT,
        "3. Platform",
    ),
    Hook(
        "worker: device, memory pool, V1 model runner and sampler",
        "worker.py",
        FIRST_LIGHT,
        "4. Worker and model runner",
    ),
    Hook(
        "communicator (Platform.get_device_communicator_cls: vLLM's, over dist_backend)",
        "platform.py",
        FIRST_LIGHT,
        "5. Communicator",
        "dist_backend",
        _dist_backend_missing,
    ),
    Hook(
        "reference kernels and attention (kernel table, TEMPLATE_ATTN)",
        "device.py",
        FIRST_LIGHT,
        "6. Reference kernels and attention",
    ),
    Hook(
        "eager mode: the first token (no compilation, no graphs)",
        "platform.py",
        FIRST_LIGHT,
        "7. Eager mode: the first token",
    ),
    Hook(
        "Model Runner V2 and its sampler (vLLM's Triton kernels)",
        "worker.py",
        SPEED,
        "8. Model Runner V2",
        "kernel_compiler",
        _kernel_compiler_missing,
        "vLLM's V1 model runner and torch sampler, synchronous scheduling",
    ),
    Hook(
        "pinned / UVA buffers (get_accelerator_view_from_cpu_tensor: DEVICE.pinned_device_view)",
        "device.py",
        SPEED,
        "9. Pinned and UVA buffers",
        "array_interface",
        without="no device views (the V1 model runner copies its inputs)",
    ),
    Hook(
        "kernels (the IR provider, CustomOp and fused-model kernels)",
        "kernels/",
        SPEED,
        "10. Kernels: IR providers and custom ops",
        "kernel_compiler",
        _kernel_compiler_missing,
        without="the reference kernels (plain torch), or the extension's where kernels/ has them",
    ),
    Hook(
        "attention kernels (TEMPLATE_ATTN on the device)",
        "attention_kernels.py",
        SPEED,
        "11. Attention kernels",
        "kernel_compiler",
        _kernel_compiler_missing,
        without="the reference paged attention (plain torch), or the extension's where "
        "attention_kernels.py has it",
    ),
    Hook(
        "compiler backend (the graph stage hands pieces to Inductor, which generates Triton)",
        "platform.py",
        SPEED,
        "12. Compiler backend and passes",
        "kernel_compiler",
        _kernel_compiler_missing,
        "no compilation, unless the fusion_only stage (no code generation) is asked for",
    ),
    Hook(
        "graph capture backend (Platform.get_static_graph_wrapper_cls, a capturing communicator)",
        "graphs.py",
        SPEED,
        "13. Graph capture",
        "graph_api",
        _graph_api_missing,
        "no graphs (eager mode)",
        refused_when_absent=False,
    ),
    Hook(
        "the hand-written model (the model_impl option)",
        "device.py",
        SPEED,
        "14. The hand-written model",
    ),
    Hook("Ray executor (ray_device_key)", "platform.py", SPEED, "15. Ray"),
)


def hook_problems(identity: DeviceIdentity, module: Any) -> list[str]:
    """One line per hook that cannot run: a first-light hook whose API is not named in
    ``identity``, or any hook whose named API is absent here (with a device module given)."""
    problems = []
    for hook in HOOKS:
        if hook.field is None:
            continue
        api = getattr(identity, hook.field)
        why: str | None = None
        if api is None and hook.tier == FIRST_LIGHT:
            why = f"identity.py names no {hook.field} for {identity.device_type}"
        elif api is not None and module is not None and hook.refused_when_absent:
            why = hook.missing_here(identity, api, module)
        if why is not None:
            problems.append(
                f"{hook.name} in {FOLDER}/{hook.files}: {why}; see {GUIDE}, {hook.section!r}"
            )
    return problems


def first_light_parts(identity: DeviceIdentity = IDENTITY) -> list[str]:
    """One line per speed hook the table leaves out, saying what runs in its place."""
    return [
        f"{hook.name}: identity.py names no {hook.field} for {identity.device_type}, so "
        f"{hook.without} ({GUIDE}, {hook.section!r})"
        for hook in HOOKS
        if hook.tier == SPEED and hook.field is not None and getattr(identity, hook.field) is None
    ]


def graph_api_problem(identity: DeviceIdentity = IDENTITY) -> str | None:
    """Why the named graph API cannot capture on this machine's device (None: it can)."""
    if identity.graph_api is None or not identity.present():
        return None
    return _graph_api_missing(identity, identity.graph_api, identity.torch_module_or_none())


@functools.cache
def graph_api(identity: DeviceIdentity = IDENTITY) -> str | None:
    """The graph API this folder captures with here: the table's, or None where the device's
    extension lacks it (``platform.first_light_defaults`` then warns, with the fix)."""
    return None if graph_api_problem(identity) else identity.graph_api


def problem(found_vllm: tuple[str, str] | None, identity: DeviceIdentity = IDENTITY) -> str | None:
    """A message if torch sees no such device here or a hook cannot run."""
    import torch

    device = identity.device_type
    module = identity.torch_module_or_none() if identity.present() else None
    problems = []
    if module is None:
        others = " or ".join(f"{DEVICE_ENV}={d}" for d in DEVICE_PACKAGES if d != device)
        problems.append(
            f"torch {torch.__version__} sees no {device} device on this machine "
            f"(torch.{identity.torch_module}): run on a machine with one and its torch "
            f"extension" + (f", or set {others} for another backend" if others else "")
        )
    problems += hook_problems(identity, module)
    if not problems:
        return None
    lines = "\n".join(f"- {p}" for p in problems)
    return (
        f"{DEVICE_ENV}={device} asks for the {device} device ({FOLDER}), which cannot run:\n{lines}"
    )

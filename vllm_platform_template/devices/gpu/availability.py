"""Whether this machine can run this folder's device: read by the entry point.

vLLM hook served: the ``vllm.platform_plugins`` entry point
(``platform_plugin.activation``) asks before it names the platform class, in
every vLLM process, so nothing here imports vLLM or this folder's kernels.
Two checks, both read from ``identity.py``:

- the device: ``torch.<module>`` exists and sees one;
- each hook of :data:`HOOKS`: the runtime API it is built on is named in the
  identity table (``None``: not provided for this device yet) and, on a machine
  with the device, present (Triton installed, the ``torch.distributed``
  backend built, the graph class in ``torch.<module>``).

Every problem is reported at once, each naming the hook, its files and its
section of docs/porting-guide.md, so a port sees its whole list at the first
run instead of an error at some later import. Proven on any machine, with a
fake device module, by ``tests/unit/test_device_identity.py``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_platform_template.devices.gpu.identity import IDENTITY, DeviceIdentity
from vllm_platform_template.settings import DEVICE_ENV

FOLDER = f"devices/{Path(__file__).parent.name}"
GUIDE = "docs/porting-guide.md"


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
    if not (hasattr(module, name) and hasattr(module, "graph")):
        return f"torch.{identity.torch_module} has no {name} and graph()"
    return None


def _nothing_to_check(identity: DeviceIdentity, name: str, module: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Hook:
    """One hook of this folder and the runtime API (an identity field) it is built on."""

    name: str
    files: str
    field: str
    section: str
    """Its section of docs/porting-guide.md."""
    missing_here: Callable[[DeviceIdentity, str, Any], str | None]
    """``(identity, api, torch_module) -> problem``: the named API is absent on this machine."""


HOOKS = (
    Hook(
        "communicator (Platform.get_device_communicator_cls, dist_backend)",
        "communicator.py",
        "dist_backend",
        "5. Communicator",
        _dist_backend_missing,
    ),
    Hook(
        "model runner and sampler (vLLM's Model Runner V2 and its sampler are Triton kernels)",
        "worker.py",
        "kernel_compiler",
        "6. Model runner and sampler",
        _kernel_compiler_missing,
    ),
    Hook(
        "pinned / UVA buffers (get_accelerator_view_from_cpu_tensor)",
        "views.py",
        "array_interface",
        "7. Pinned and UVA buffers",
        _nothing_to_check,
    ),
    Hook(
        "kernels (the IR provider, CustomOp and fused-model kernels, attention kernels)",
        "kernels/, attention_kernels.py",
        "kernel_compiler",
        "8. Kernels",
        _kernel_compiler_missing,
    ),
    Hook(
        "compiler backend (the graph stage hands pieces to Inductor, which generates Triton)",
        "platform.py",
        "kernel_compiler",
        "10. Compiler backend and passes",
        _kernel_compiler_missing,
    ),
    Hook(
        "graph capture backend (Platform.get_static_graph_wrapper_cls)",
        "graphs.py",
        "graph_api",
        "11. Graph capture",
        _graph_api_missing,
    ),
)


def hook_problems(identity: DeviceIdentity, module: Any) -> list[str]:
    """One line per hook whose API is not named in ``identity`` or (with a device
    module given) is absent on this machine."""
    problems = []
    for hook in HOOKS:
        api = getattr(identity, hook.field)
        why: str | None = f"identity.py names no {hook.field} for {identity.device_type}"
        if api is not None:
            why = hook.missing_here(identity, api, module) if module is not None else None
        if why is not None:
            problems.append(
                f"{hook.name} in {FOLDER}/{hook.files}: {why}; see {GUIDE}, {hook.section!r}"
            )
    return problems


def problem(found_vllm: tuple[str, str] | None, identity: DeviceIdentity = IDENTITY) -> str | None:
    """A message if torch sees no such device here or any hook lacks its runtime API."""
    import torch

    device = identity.device_type
    module = identity.torch_module_or_none() if identity.present() else None
    problems = []
    if module is None:
        problems.append(
            f"torch {torch.__version__} sees no {device} device on this machine "
            f"(torch.{identity.torch_module}): run on a machine with one and its torch "
            f"extension, or set {DEVICE_ENV}=cpu for the CPU reference backend"
        )
    problems += hook_problems(identity, module)
    if not problems:
        return None
    lines = "\n".join(f"- {p}" for p in problems)
    return (
        f"{DEVICE_ENV}={device} asks for the {device} device ({FOLDER}), which cannot run:\n{lines}"
    )

"""The device folder's first light on the CPU: one vLLM engine, its identity table set to ``cpu``.

``python tests/e2e/first_light_on_cpu.py [demo options]`` runs ``vllm-template
demo`` in this process (vLLM's engine core and its one worker too:
``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with the device folder's platform, worker,
communicator, kernel table and attention serving the CPU, so that CI proves the
folder's first-light tier without the device (``tests/e2e/test_gpu_first_light.py``).
Nothing of the folder is replaced; what changes is what the folder reads:

- the identity table (``identity.IDENTITY``): the CPU's torch names (device type
  and module ``cpu``, dispatch key ``CPU``, ``torch.distributed`` backend
  ``gloo``) and no runtime API of the speed tier (graph API, kernel compiler,
  array interface: ``None``), so the platform runs first light;
- the plugin's device registry (``settings.DEVICE_PACKAGES`` and
  ``PLATFORM_QUALNAMES``): ``cpu`` names the device folder and nothing else, so
  activation, the kernel table and the attention kernels are the folder's;
- the device runtime the folder and vLLM's GPU worker call, which torch gives an
  accelerator and not the CPU (:func:`give_the_cpu_a_device_runtime`):
  ``torch.cpu``'s missing device-module functions (name, properties, seeding,
  memory statistics), ``torch.accelerator``'s memory and synchronisation calls
  (answered from the host's memory; CPU work is synchronous) and ``torch.Event``
  (recording on the CPU is refused by torch; vLLM's own CPU model runner
  replaces it the same way).

The processes the engine starts (vLLM inspects a model's class in a
subprocess) begin with the same stand-in: ``first_light_site/sitecustomize.py``,
first on their ``PYTHONPATH``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from pathlib import Path
from typing import Any

import psutil
import torch

# vLLM's worker asks that a share of the device's memory be free at start (0.92 by
# default); the host is shared with other processes, so the runs ask for 5% of it.
ENGINE_ARGS = '{"gpu_memory_utilization": 0.05}'
HERE = Path(__file__).resolve().parent
SITE = HERE / "first_light_site"  # its sitecustomize applies the stand-in at start-up


class HostEvent:
    """``torch.Event`` for work that is already done when it is queued (the CPU's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True


def _memory_info(*args: Any, **kwargs: Any) -> tuple[int, int]:
    memory = psutil.virtual_memory()
    return memory.available, memory.total


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def give_the_cpu_a_device_runtime() -> None:
    """The device-module and accelerator calls torch answers for an accelerator, for the CPU."""
    module: Any = torch.cpu
    runtime = {
        "get_device_name": lambda device=None: "CPU (standing in for the device)",
        "get_device_properties": lambda device=None: types.SimpleNamespace(
            name="CPU", total_memory=_memory_info()[1]
        ),
        "manual_seed_all": torch.manual_seed,
        "empty_cache": _nothing,
        "reset_peak_memory_stats": _nothing,
        "max_memory_allocated": lambda device=None: 0,
        "memory_allocated": lambda device=None: 0,
        "mem_get_info": _memory_info,
    }
    for name, function in runtime.items():
        if not hasattr(module, name):
            setattr(module, name, function)
    accelerator: Any = torch.accelerator
    accelerator.synchronize = _nothing
    accelerator.empty_cache = _nothing
    accelerator.empty_host_cache = _nothing
    accelerator.reset_peak_memory_stats = _nothing
    accelerator.memory_stats = lambda *args, **kwargs: {}
    accelerator.memory_reserved = lambda *args, **kwargs: 0
    accelerator.get_memory_info = _memory_info
    torch.Event = HostEvent  # type: ignore[misc,assignment]


def point_the_folder_at_the_cpu() -> str:
    """Identity and registry as described above; returns the folder's package."""
    from vllm_platform_template import settings
    from vllm_platform_template.devices.gpu import identity

    device = identity.IDENTITY.device_type
    package, qualname = settings.DEVICE_PACKAGES[device], settings.PLATFORM_QUALNAMES[device]
    identity.IDENTITY = dataclasses.replace(
        identity.IDENTITY,
        device_type="cpu",
        torch_module="cpu",
        dispatch_key="CPU",
        dist_backend="gloo",
        graph_api=None,
        kernel_compiler=None,
        array_interface=None,
    )
    settings.DEVICE_PACKAGES.clear()
    settings.DEVICE_PACKAGES["cpu"] = package
    settings.PLATFORM_QUALNAMES.clear()
    settings.PLATFORM_QUALNAMES["cpu"] = qualname
    return package


def stand_in() -> None:
    """The CPU stands in for the device in this process (idempotent)."""
    give_the_cpu_a_device_runtime()
    point_the_folder_at_the_cpu()


def main(argv: list[str]) -> int:
    children = [str(SITE), str(HERE), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in children if p)
    stand_in()
    from vllm_platform_template.settings import DEVICE_ENV

    os.environ[DEVICE_ENV] = "cpu"
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core and worker in here
    from vllm_platform_template.cli.main import main as cli

    engine_args = [] if "--engine-args" in argv else ["--engine-args", ENGINE_ARGS]
    return cli(["demo", "--device", "cpu", *engine_args, *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

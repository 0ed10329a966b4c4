"""``npu``: a PrivateUse1 test accelerator, the device a vendor's torch extension would be.

It reaches torch the way a real accelerator's extension does (torch_npu,
intel_extension_for_pytorch's XPU before torch had it): a compiled library
registers the PrivateUse1 backend's runtime and operators (``csrc/``), the
backend is renamed ``npu`` (or the name in ``NPU_TEST_DEVICE_NAME``: any device
type a generated plugin names), its device module becomes ``torch.npu``, and torch
loads it at ``import torch`` through the ``torch.backends`` entry point (device
backend autoload). Its memory is host memory owned by its own allocator, so
everything vLLM does with device memory - views, copies, a KV cache, memory
statistics, pinned host buffers, collectives - runs through the PrivateUse1
paths a real device takes, on any machine; and, as on a real device, the host
cannot read it: each block is mapped without access, opened only while one of
the device's operators, kernels or copies holds a host view of it (as OpenReg
does), so a host read through a pointer stops the process with a message naming
the device memory it hit (about 14 us more per fallback operator; 3 % on the
first-light engine tests).

Pieces, each with the torch hook it serves:

- ``csrc/runtime.cpp``: the device allocator (``c10::DeviceAllocator``; its
  memory closed to the host, ``HostAccess``), the pinned host allocator
  (``at::HostAllocator``), the device guard with streams and events
  (``DeviceGuardImplInterface``), generators and the
  ``PrivateUse1HooksInterface``;
- ``csrc/streams.cpp``: streams whose work runs on a thread of their own while the
  host goes on (the default stream's at launch), waits where a GPU waits
  (``.item()``, pageable copies, data-dependent sizes), errors raised at the next
  synchronization;
- ``csrc/ops.cpp``: the operators a device owns (empty, views, resize, copies)
  and the fallback that runs every other operator on host views of the same
  storage, counting each dispatch (:func:`dispatch_counts`; ``cpu_fallback:<name>``
  once more for each the fallback served), or records it into the graph being captured;
- ``csrc/kernels.cpp``: the device's own kernels for vLLM's hot operators
  (``torch.ops.<name>.rms_norm``, ``fused_add_rms_norm``, ``silu_and_mul``,
  ``rotary_embedding``, ``reshape_and_cache``, ``paged_attention``): PrivateUse1
  and Meta kernels, counted, recorded into graphs like any device launch;
- ``csrc/graphs.cpp``: ``torch.accelerator.Graph`` (``at::GraphImplInterface``
  in ``at::GraphImplRegistry``): capture records without running, memory pools,
  replay, and the capture rules of a GPU;
- :mod:`.device_module`: ``torch.npu`` (``torch._register_device_module``);
- :mod:`.collectives`: the ``npuccl`` (``<name>ccl``) ``torch.distributed`` backend.

``python -m npu_test_device build`` compiles the library once per source and
torch version (``torch.utils.cpp_extension``, ninja) into
``~/.cache/npu_test_device/``; loading afterwards takes a fraction of a second.
The device is registered only where ``NPU_TEST_DEVICE=1`` (:func:`autoload`):
every other process of the same environment keeps torch as it is. The package
is installed as a copy, not editable (torch imports its entry point in every
process that sees the environment, also through a ``.pth`` that does not run
editable finders): after changing it, ``pip install ./tests/test_device`` and
build again.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions: torch's autoload imports this module while
# `import torch` is still running (the last step of torch's own initialisation).

ENABLE_ENV = "NPU_TEST_DEVICE"
"""``1``: torch's device backend autoload registers the test device in this process."""
NAME_ENV = "NPU_TEST_DEVICE_NAME"
"""The device type it registers as (``npu`` by default): a plugin generated for device
``mydev`` runs on it as ``torch.device("mydev")``, ``torch.mydev``."""
NAME = os.environ.get(NAME_ENV) or "npu"
"""The device type of the test device's tensors (``torch.device(NAME)``)."""
DIST_BACKEND = f"{NAME}ccl"
"""Its ``torch.distributed`` backend (``npuccl`` for ``npu``)."""
KERNELS_ENV = "NPU_TEST_DEVICE_KERNELS"
"""``0``: the device as a vendor's extension is at first light - its runtime, operators and
graphs, no kernels of its own (``torch.ops.<NAME>`` empty), so a plugin runs the reference."""
COUNT_ENV = "NPU_TEST_DEVICE_COUNT"
"""How many devices it has (2 by default)."""
MEMORY_ENV = "NPU_TEST_DEVICE_MEMORY"
"""Each device's memory in bytes (4 GiB by default)."""
CSRC = Path(__file__).with_name("csrc")
SOURCES = ("runtime.cpp", "streams.cpp", "ops.cpp", "graphs.cpp", "kernels.cpp")
LIBRARY = "npu_test_device"


class TestDeviceNotBuilt(RuntimeError):
    """The library is not compiled for this source and torch version."""


def build_dir() -> Path:
    """Where this source and torch version's library is (or will be) built."""
    import torch

    digest = hashlib.sha256(torch.__version__.encode())
    for name in (*SOURCES, "runtime.h"):
        digest.update((CSRC / name).read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "npu_test_device" / digest.hexdigest()[:16]


def library_path() -> Path:
    return build_dir() / f"{LIBRARY}.so"


TORCH_BATON = "lock"
"""The file ``torch.utils.cpp_extension`` creates in the build directory while it builds
(``FileBaton``): left behind by a build that was killed, every later build waits on it
forever."""


@contextlib.contextmanager
def _exclusive_build(target: Path) -> Iterator[None]:
    """Hold the build directory's ``flock`` (the kernel drops it when its holder dies):
    while it is held, torch's baton can only be a killed build's, and is removed."""
    with open(target / "build.flock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        baton = target / TORCH_BATON
        if baton.exists():
            print(
                f"npu_test_device: removing {baton}, left by a build that was killed",
                file=sys.stderr,
            )
            baton.unlink()
        yield


def build(verbose: bool = False) -> Path:
    """Compile the library if this source and torch version have none yet; its path."""
    from torch.utils import cpp_extension

    target = build_dir()
    target.mkdir(parents=True, exist_ok=True)
    with _exclusive_build(target):
        if not library_path().exists():
            cpp_extension.load(
                name=LIBRARY,
                sources=[str(CSRC / name) for name in SOURCES],
                extra_cflags=["-O2"],
                build_directory=str(target),
                is_python_module=False,
                verbose=verbose,
            )
    return library_path()


def is_registered() -> bool:
    """Whether this process has the test device (``torch.npu`` and ``npu`` tensors)."""
    import torch

    return torch._C._get_privateuse1_backend_name() == NAME and hasattr(torch, NAME)


def register() -> None:
    """Load the built library and register the device with torch (idempotent)."""
    import torch

    if is_registered():
        return
    path = library_path()
    if not path.exists():
        raise TestDeviceNotBuilt(
            f"the {NAME} test device is not built for torch {torch.__version__} "
            f"(expected {path}): run `python -m npu_test_device build`"
        )
    torch.ops.load_library(str(path))
    torch.utils.rename_privateuse1_backend(NAME)
    torch.ops.npu_test.register_graph_impl()  # torch.accelerator.Graph, keyed by the new name
    if os.environ.get(KERNELS_ENV) != "0":
        torch.ops.npu_test.register_kernels(NAME)  # its kernels: torch.ops.<NAME>.rms_norm, ...
    from npu_test_device import collectives, device_module

    torch._register_device_module(NAME, device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    collectives.register()
    atexit.register(_finish_queued_work)


def _finish_queued_work() -> None:
    """At exit, the streams' queued work runs to its end first, as a GPU's context waits
    for its kernels when the process ends: a stream's thread that takes the GIL while the
    interpreter finalizes aborts the process."""
    import torch

    for index in range(torch.accelerator.device_count()):
        try:
            torch.accelerator.synchronize(index)
        except Exception as error:  # a queued operator's error, raised at this synchronization
            print(f"{NAME}:{index}: queued work failed at exit: {error}", file=sys.stderr)


def autoload() -> None:
    """torch's ``torch.backends`` entry point: register where ``NPU_TEST_DEVICE=1``."""
    if os.environ.get(ENABLE_ENV) == "1":
        register()


def dispatch_counts() -> dict[str, int]:
    """How many times each operator ran on the device in this process, by name."""
    import torch

    names, counts = torch.ops.npu_test.dispatch_counts()
    return dict(zip(names, counts, strict=True))


def reset_dispatch_counts() -> None:
    import torch

    torch.ops.npu_test.reset_dispatch_counts()


def host_view(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the same bytes as ``tensor`` (the device's memory is host memory)."""
    import torch

    return torch.ops.npu_test.host_view(tensor)


def main(argv: list[str]) -> int:
    if argv[:1] != ["build"]:
        print("usage: python -m npu_test_device build", file=sys.stderr)
        return 2
    # The build imports torch, whose autoload would register the device it is building
    # (where NPU_TEST_DEVICE=1, as in every tox env of a first-light plugin) and fail.
    os.environ[ENABLE_ENV] = "0"
    print(build(verbose="-v" in argv))
    return 0

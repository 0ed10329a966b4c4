"""Graph backends behind one small interface: how a device records and replays a graph.

A real accelerator records the kernels a callable launches and replays them
later on the same memory: ``CudaGraphBackend`` does that with
``torch.cuda.CUDAGraph`` in the platform's global graph pool. The CPU has no
graphs; ``CpuGraphEmulation`` implements the same *contract* so that vLLM's
capture sizes, padding and dispatch by batch descriptor run and are tested on
CPU: capture runs the callable once and keeps its inputs and outputs as the
static buffers; replay runs the callable again on the captured inputs (as a
real graph reads the captured addresses) and writes the results into the
captured outputs, which it returns (same storage every replay).

The emulation saves no launch time and no allocation: the callable's own
temporaries are still allocated on every replay. It exists to test the
control flow and the address contract, not for speed.

No module here imports vLLM; a vendor adds one class for its device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch


@dataclass
class CapturedGraph:
    """One recorded graph: the backend's handle and the static outputs."""

    handle: Any
    output: Any


class GraphBackend(Protocol):
    name: str
    weak_ref_outputs: bool  # outputs live in a graph pool; the wrapper may keep weak refs

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph: ...

    def replay(self, graph: CapturedGraph) -> None: ...


class CudaGraphBackend:
    """``torch.cuda.CUDAGraph`` captured into the platform's global graph pool."""

    name = "cuda"
    weak_ref_outputs = True

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        graph = torch.cuda.CUDAGraph()
        # Capture on the caller's stream when it is a side stream (vLLM's capture
        # context); CUDA cannot capture on the default stream, so torch then uses its own.
        stream = torch.cuda.current_stream()
        capture_stream = None if stream == torch.cuda.default_stream() else stream
        with torch.cuda.graph(graph, pool=self.pool, stream=capture_stream):
            output = fn()
        return CapturedGraph(graph, output)

    def replay(self, graph: CapturedGraph) -> None:
        graph.handle.replay()


def _copy_into(static: Any, fresh: Any) -> None:
    """Copy ``fresh`` outputs into the ``static`` ones (same nesting)."""
    if isinstance(static, torch.Tensor):
        if static.shape != fresh.shape or static.dtype != fresh.dtype:
            raise RuntimeError(
                f"graph replay produced a {tuple(fresh.shape)} {fresh.dtype} output where the "
                f"capture produced {tuple(static.shape)} {static.dtype}: the piece is not static"
            )
        static.copy_(fresh)
    elif isinstance(static, (list, tuple)):
        for s, f in zip(static, fresh, strict=True):
            _copy_into(s, f)
    elif static != fresh:
        raise RuntimeError(f"graph replay changed a non-tensor output: {static!r} -> {fresh!r}")


class CpuGraphEmulation:
    """The static-graph contract on the CPU (see the module docstring)."""

    name = "cpu"
    weak_ref_outputs = False

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        return CapturedGraph(fn, fn())

    def replay(self, graph: CapturedGraph) -> None:
        _copy_into(graph.output, graph.handle())


def graph_backend_for(device_type: str, pool: Any = None) -> GraphBackend:
    """The graph backend of a torch device type."""
    if device_type == "cuda":
        return CudaGraphBackend(pool)
    if device_type == "cpu":
        return CpuGraphEmulation()
    raise ValueError(f"no graph backend for device type {device_type!r}; add one in backends.py")

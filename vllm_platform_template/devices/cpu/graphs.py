"""The CPU's static-graph backend: vLLM's graph contract, emulated.

vLLM hook served: the graph backend ``TemplateGraphWrapper`` (the platform's
``get_static_graph_wrapper_cls``) captures and replays through. The CPU has no
graphs; :class:`CpuGraphEmulation` keeps the *contract* so that vLLM's capture
sizes, padding and dispatch by batch descriptor run and are tested on CPU:
capture runs the callable once and keeps its inputs and outputs as the static
buffers; replay runs the callable again on the captured inputs (as a real
graph reads the captured addresses) and writes the results into the captured
outputs, which it returns (same storage every replay).

It saves no launch time and no allocation: the callable's own temporaries are
still allocated on every replay. It exists to test the control flow and the
address contract, not for speed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vllm_platform_template.device import CapturedGraph


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
    pool: Any = None  # host memory: no graph pool

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        return CapturedGraph(fn, fn())

    def replay(self, graph: CapturedGraph) -> None:
        _copy_into(graph.output, graph.handle())

    def weak_output(self, output: Any) -> Any:
        return output  # the static outputs are the emulation's own buffers

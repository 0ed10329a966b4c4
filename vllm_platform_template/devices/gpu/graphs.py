"""The GPU's static-graph backend: CUDA graphs in the platform's graph pool.

vLLM hook served: the graph backend ``TemplateGraphWrapper`` (the platform's
``get_static_graph_wrapper_cls``) captures and replays through. It records the
kernels a piece launches into a ``torch.cuda.CUDAGraph`` in vLLM's global
graph pool and replays them on the same memory. A vendor's device does the
same with its runtime's graph API (``torch.<device>.graph``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vllm_platform_template.device import CapturedGraph
from vllm_platform_template.devices.gpu.cuda_views import non_owning_view


def _map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(fn, v) for v in value)
    if isinstance(getattr(value, "tensors", None), dict):  # vLLM's IntermediateTensors
        value.tensors = {k: _map_tensors(fn, v) for k, v in value.tensors.items()}
    return value


class CudaGraphBackend:
    """``torch.cuda.CUDAGraph`` captured into the platform's global graph pool."""

    name = "cuda"

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

    def weak_output(self, output: Any) -> Any:
        # The pool owns the memory; a non-owning alias lets later captures reuse the
        # blocks of outputs the next piece has consumed (vLLM's weak_ref_tensors,
        # without vLLM's compiled op: cuda_views.py).
        return _map_tensors(non_owning_view, output)

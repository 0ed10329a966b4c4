"""The device's static-graph backend: its runtime's graphs in the platform's graph pool.

vLLM hook served: the graph capture backend ``TemplateGraphWrapper`` (the
platform's ``get_static_graph_wrapper_cls``) captures and replays through. It
records the kernels a piece launches into a ``torch.<module>.<graph_api>``
(``torch.cuda.CUDAGraph`` with the identity's values) in vLLM's global graph
pool, captured with ``torch.<module>.graph``, and replays them on the same
memory; the outputs are kept as non-owning views (``views.py``). A device
whose torch module has the same API (``torch.<device>.graph``) needs only the
identity table; docs/porting-guide.md, "Graph capture". Proven on the
device by ``tests/gpu/test_device_graphs.py`` and ``tests/e2e/test_gpu_engine.py``
(captures, replays, tokens equal to transformers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vllm_platform_template.device import CapturedGraph
from vllm_platform_template.devices.gpu.identity import IDENTITY, torch_module
from vllm_platform_template.devices.gpu.views import non_owning_view


def _map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(fn, v) for v in value)
    if isinstance(getattr(value, "tensors", None), dict):  # vLLM's IntermediateTensors
        value.tensors = {k: _map_tensors(fn, v) for k, v in value.tensors.items()}
    return value


class DeviceGraphBackend:
    """``torch.<module>.<graph_api>`` captured into the platform's global graph pool."""

    name = IDENTITY.device_type

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        module = torch_module()
        if IDENTITY.graph_api is None:
            raise NotImplementedError(
                f"identity.py names no graph API for {IDENTITY.device_type}: see "
                "docs/porting-guide.md, 'Graph capture'"
            )
        graph = getattr(module, IDENTITY.graph_api)()
        # Capture on the caller's stream when it is a side stream (vLLM's capture
        # context); CUDA cannot capture on the default stream, so torch then uses its own.
        stream = module.current_stream()
        capture_stream = None if stream == module.default_stream() else stream
        with module.graph(graph, pool=self.pool, stream=capture_stream):
            output = fn()
        return CapturedGraph(graph, output)

    def replay(self, graph: CapturedGraph) -> None:
        graph.handle.replay()

    def weak_output(self, output: Any) -> Any:
        # The pool owns the memory; a non-owning alias lets later captures reuse the
        # blocks of outputs the next piece has consumed (vLLM's weak_ref_tensors,
        # without vLLM's compiled op: views.py).
        return _map_tensors(non_owning_view, output)

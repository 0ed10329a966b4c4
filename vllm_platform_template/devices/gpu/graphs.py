"""The device's static-graph backend: its runtime's graphs in the platform's graph pool.

vLLM hook served: the graph capture backend ``TemplateGraphWrapper`` (the
platform's ``get_static_graph_wrapper_cls``) captures and replays through. It
records the kernels a piece launches into the identity's graph API in vLLM's
global graph pool and replays them on the same memory:

- ``graph_api = "accelerator"``: torch's device-neutral ``torch.accelerator.Graph``
  (torch 2.13; the device's extension registers its implementation), captured
  on a side stream that waits for the current one;
- a class name (``"CUDAGraph"``): ``torch.<module>.<graph_api>`` captured with
  ``torch.<module>.graph`` (CUDA on torch 2.11, which has no accelerator graph).

The outputs are kept as non-owning views where the identity names an array
interface (``views.py``), so later captures reuse the blocks of outputs the next
piece has consumed; without one, as they are (the pool keeps their memory
either way). docs/porting-guide.md, "Graph capture". Proven on the device by
``tests/devices/gpu/speed_tier/test_device_graphs.py`` and
``tests/devices/gpu/speed_tier/test_gpu_engine.py``
(captures, replays, tokens equal to transformers), and through
``torch.accelerator.Graph`` on the PrivateUse1 test device by
``tests/devices/gpu/speed_tier/test_gpu_graphs_accelerator.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vllm_platform_template.device import CapturedGraph, capture_accelerator_graph
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY, torch_module
from vllm_platform_template.devices.gpu.views import SUPPORTED_INTERFACE, non_owning_view


def _map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(fn, v) for v in value)
    if isinstance(getattr(value, "tensors", None), dict):  # vLLM's IntermediateTensors
        value.tensors = {k: _map_tensors(fn, v) for k, v in value.tensors.items()}
    return value


class DeviceGraphBackend:
    """The identity's graph API, captured into the platform's global graph pool."""

    name = IDENTITY.device_type

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        if IDENTITY.graph_api is None:
            raise NotImplementedError(
                f"identity.py names no graph API for {IDENTITY.device_type}: see "
                "docs/porting-guide.md, 'Graph capture'"
            )
        if IDENTITY.graph_api == ACCELERATOR_GRAPH:
            return capture_accelerator_graph(fn, self.pool)
        module = torch_module()
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
        # without vLLM's compiled op: views.py). Without the array interface views are
        # made by, the outputs stay as they are: the same results, more pool memory.
        if IDENTITY.array_interface != SUPPORTED_INTERFACE:
            return output
        return _map_tensors(non_owning_view, output)

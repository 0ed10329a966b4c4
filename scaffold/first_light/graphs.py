"""The device's static-graph backend: ``torch.accelerator.Graph``, where the extension has it.

vLLM hook served: the graph capture backend ``TemplateGraphWrapper`` (the
platform's ``get_static_graph_wrapper_cls``) and, for whole decode steps of the
V1 runner, ``TemplateFullGraphWrapper`` capture and replay through. ``identity.py``
names torch's device-neutral graphs (``"accelerator"``); where your torch extension
does not register them (yet), or the identity names no graph API, the platform runs
every batch eagerly and nothing here is called (``availability.graph_api``; the
platform says why at warning level). Speed (docs/porting-guide.md, "13. Graph
capture"): register ``torch.accelerator.Graph``'s implementation for your device;
this backend then captures on a side stream in the platform's pool
(``torch.<module>.graph_pool_handle()``), and replays on the same memory; outputs
stay as they are (a non-owning view needs the array interface and device views,
docs/porting-guide.md, "9. Pinned and UVA buffers"). Another graph API: write the
three methods with it. ``tests/devices/gpu/test_gpu_platform.py`` holds the
first-light policy; the FULL wrapper these graphs serve is
``tests/shared/test_full_graph_wrapper.py``'s, proven in an engine on the device by
``tests/devices/gpu/test_gpu_full_graphs.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_platform_template.device import CapturedGraph, capture_accelerator_graph
from vllm_platform_template.devices.gpu.availability import graph_api
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY

SECTION = "docs/porting-guide.md, '13. Graph capture'"


class DeviceGraphBackend:
    """``torch.accelerator.Graph`` in the platform's graph pool."""

    name = IDENTITY.device_type

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        if graph_api() != ACCELERATOR_GRAPH:
            raise NotImplementedError(f"graph capture on {IDENTITY.device_type}: see {SECTION}")
        return capture_accelerator_graph(fn, self.pool)

    def replay(self, graph: CapturedGraph) -> None:
        graph.handle.replay()

    def weak_output(self, output: Any) -> Any:
        return output  # the pool keeps the memory; the outputs keep it too

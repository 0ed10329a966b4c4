"""The device's static-graph backend: a starting point (first light runs without graphs).

vLLM hook served: the graph capture backend ``TemplateGraphWrapper`` (the
platform's ``get_static_graph_wrapper_cls``) captures and replays through. With
no graph API in ``identity.py`` the platform runs every batch eagerly and
nothing here is called. Speed (docs/porting-guide.md, "13. Graph capture"):
name the graph class in the identity table, add the communicator whose
``graph_capture`` vLLM enters around each capture (the vllm-platform-template
project's ``communicator.py``, ``--with-examples``), and write the three methods with
your runtime's graphs: ``capture`` records the kernels ``fn`` launches, in the
platform's graph pool, and returns them with the outputs; ``replay`` runs
them again on the same memory; ``weak_output`` keeps the outputs without
keeping their memory alive (the pool owns it). Until then the first-light
policy (no graphs without a graph API) is what ``tests/unit/test_gpu_platform.py``
holds; the section's test turns green once the identity names the graph API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_platform_template.device import CapturedGraph
from vllm_platform_template.devices.gpu.identity import IDENTITY

SECTION = "docs/porting-guide.md, '13. Graph capture'"


class DeviceGraphBackend:
    """Graphs of the device's runtime in the platform's graph pool (not written yet)."""

    name = IDENTITY.device_type

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph:
        raise NotImplementedError(f"graph capture on {IDENTITY.device_type}: see {SECTION}")

    def replay(self, graph: CapturedGraph) -> None:
        raise NotImplementedError(f"graph replay on {IDENTITY.device_type}: see {SECTION}")

    def weak_output(self, output: Any) -> Any:
        raise NotImplementedError(f"graph outputs on {IDENTITY.device_type}: see {SECTION}")

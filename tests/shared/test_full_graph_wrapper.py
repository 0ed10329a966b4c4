"""``TemplateFullGraphWrapper`` (``graph_wrapper/full.py``): what vLLM's V1 runner asks of it.

The V1 runner wraps the whole model for FULL graphs and reaches its wrapper class
by name (``CUDAGraphWrapper._all_instances``, ``clear_all_graphs``, each instance's
``graph_pool``); the patch ``v1_full_graphs_through_the_device`` puts this class
there for a device whose graph API is ``torch.accelerator.Graph``. Checked here
with a backend that replays by recomputing: FULL captures and replays are counted as
FULL graphs, every attribute the runner uses exists, the pool is the backend's,
and the patch leaves vLLM's runner alone on any other device.
"""

from __future__ import annotations

import inspect
import re
import types

import pytest
import torch
from platform_resolution import needs_stock_cpu_platform
from vllm.compilation.cuda_graph import CUDAGraphOptions
from vllm.config import CUDAGraphMode, VllmConfig
from vllm.forward_context import BatchDescriptor, set_forward_context
from vllm.v1.worker import gpu_model_runner

from vllm_platform_template.device import CapturedGraph
from vllm_platform_template.devices.gpu import patches
from vllm_platform_template.graph_wrapper.full import TemplateFullGraphWrapper
from vllm_platform_template.graph_wrapper.stats import FULL_STATS, STATS


class RecomputingBackend:
    """A graph backend whose replay runs the captured callable again into its output."""

    name = "recomputing"

    def __init__(self) -> None:
        self.pool: object = None

    def capture(self, fn):
        return CapturedGraph(fn, fn())

    def replay(self, graph: CapturedGraph) -> None:
        graph.output.copy_(graph.handle())

    def weak_output(self, output):
        return output


def _step(wrapper: TemplateFullGraphWrapper, config: VllmConfig, x: torch.Tensor) -> torch.Tensor:
    descriptor = BatchDescriptor(num_tokens=x.shape[0], uniform=True)
    with set_forward_context(
        None, config, cudagraph_runtime_mode=CUDAGraphMode.FULL, batch_descriptor=descriptor
    ):
        return wrapper(x)


@needs_stock_cpu_platform
def test_full_captures_and_replays_count_as_full_graphs() -> None:
    config = VllmConfig()
    backend = RecomputingBackend()
    wrapper = TemplateFullGraphWrapper(
        lambda x: x * 3, config, CUDAGraphMode.FULL, CUDAGraphOptions(), backend=backend
    )
    before_full, before_pieces = sum(FULL_STATS.replays.values()), sum(STATS.replays.values())
    x = torch.ones(5)
    _step(wrapper, config, x)  # captured
    x.fill_(2.0)
    out = _step(wrapper, config, x)  # replayed into the captured output
    assert out.tolist() == [6.0] * 5
    assert FULL_STATS.captures[5] >= 1
    assert sum(FULL_STATS.replays.values()) == before_full + 1
    assert sum(STATS.replays.values()) == before_pieces
    assert wrapper in TemplateFullGraphWrapper._all_instances
    TemplateFullGraphWrapper.clear_all_graphs()
    assert wrapper.entries == {}
    wrapper.graph_pool = ("profiling", 1)
    assert backend.pool == ("profiling", 1) and wrapper.graph_pool == ("profiling", 1)


def test_it_has_everything_vllms_v1_runner_uses_of_its_wrapper_class() -> None:
    source = inspect.getsource(gpu_model_runner)
    used = set(re.findall(r"\bCUDAGraphWrapper\.(\w+)", source))
    assert used, "vLLM's V1 runner no longer reaches CUDAGraphWrapper's class attributes"
    assert [name for name in sorted(used) if not hasattr(TemplateFullGraphWrapper, name)] == []
    wrapped = re.search(
        r"CUDAGraphWrapper\(\s*self\.model,\s*self\.vllm_config,\s*runtime_mode=", source
    )
    assert wrapped, "vLLM's V1 runner builds its FULL wrapper differently: check the signature"


@pytest.mark.parametrize(("graph_api", "patched"), [("accelerator", True), ("CUDAGraph", False)])
def test_the_patch_replaces_the_runners_wrapper_for_accelerator_graphs_only(
    monkeypatch, graph_api: str, patched: bool
) -> None:
    monkeypatch.setattr(patches, "graph_api", lambda: graph_api)  # the device's, here
    runner = types.ModuleType("runner")
    runner.CUDAGraphWrapper = object  # type: ignore[attr-defined]
    runner.graph_capture = object  # type: ignore[attr-defined]
    monkeypatch.setattr(patches, "after_import", lambda name, callback: callback(runner))
    from vllm.distributed import parallel_state

    monkeypatch.setattr(parallel_state, "graph_capture", parallel_state.graph_capture)
    patches._v1_full_graphs_through_the_device()
    assert (runner.CUDAGraphWrapper is TemplateFullGraphWrapper) == patched  # type: ignore[attr-defined]
    assert (runner.graph_capture is parallel_state.graph_capture) == patched  # type: ignore[attr-defined]

"""TemplateGraphWrapper with a fake runnable: capture, replay, address check, fallback."""

from __future__ import annotations

import pytest
import torch
from vllm.compilation.counter import compilation_counter
from vllm.compilation.cuda_graph import CUDAGraphOptions
from vllm.compilation.monitor import set_cudagraph_capturing_enabled
from vllm.config import CUDAGraphMode, VllmConfig
from vllm.forward_context import BatchDescriptor, set_forward_context

from vllm_platform_template.device import CapturedGraph
from vllm_platform_template.devices.cpu.graphs import CpuGraphEmulation
from vllm_platform_template.graph_wrapper.stats import STATS
from vllm_platform_template.graph_wrapper.wrapper import GraphInputMovedError, TemplateGraphWrapper


class Piece:
    """Stands for a compiled piece: y = x * 2 + bias, counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.bias = torch.ones(4)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * 2 + self.bias


class FailingBackend(CpuGraphEmulation):
    def capture(self, fn):  # type: ignore[override]
        raise RuntimeError("capture failed: out of graph memory")


@pytest.fixture
def vllm_config() -> VllmConfig:
    return VllmConfig(additional_config={"template": {"graph_debug": True}})


def run(wrapper, config, x, mode=CUDAGraphMode.PIECEWISE, tokens=None):
    descriptor = BatchDescriptor(num_tokens=tokens or x.shape[0])
    with set_forward_context(
        None, config, cudagraph_runtime_mode=mode, batch_descriptor=descriptor
    ):
        return wrapper(x)


def make(config, backend=None, **options):
    return TemplateGraphWrapper(
        Piece(),
        config,
        CUDAGraphMode.PIECEWISE,
        cudagraph_options=CUDAGraphOptions(**options),
        backend=backend or CpuGraphEmulation(),
    )


def test_capture_once_then_replay_into_static_output(vllm_config) -> None:
    wrapper = make(vllm_config, gc_disable=True)
    x = torch.zeros(8, 4)
    before = compilation_counter.num_cudagraph_captured
    first = run(wrapper, vllm_config, x)
    assert compilation_counter.num_cudagraph_captured == before + 1
    x.fill_(1.0)  # new data in the same buffer, as vLLM's persistent inputs
    second = run(wrapper, vllm_config, x)
    assert second is first, "replay must return the captured output buffer"
    torch.testing.assert_close(second, torch.full((8, 4), 3.0))
    assert wrapper.runnable.calls == 2
    assert STATS.replays[8] >= 1


def test_one_graph_per_batch_descriptor(vllm_config) -> None:
    wrapper = make(vllm_config)
    a, b = torch.zeros(4, 4), torch.zeros(8, 4)
    out_a = run(wrapper, vllm_config, a)
    out_b = run(wrapper, vllm_config, b)
    assert out_a is not out_b
    assert len(wrapper.entries) == 2
    assert run(wrapper, vllm_config, a) is out_a


def test_other_runtime_mode_runs_eagerly(vllm_config) -> None:
    wrapper = make(vllm_config)
    x = torch.zeros(2, 4)
    out = run(wrapper, vllm_config, x, mode=CUDAGraphMode.NONE)
    assert not wrapper.entries
    torch.testing.assert_close(out, torch.ones(2, 4))


def test_debug_mode_detects_moved_inputs(vllm_config) -> None:
    wrapper = make(vllm_config)
    run(wrapper, vllm_config, torch.zeros(4, 4))
    with pytest.raises(GraphInputMovedError, match="persistent buffers"):
        run(wrapper, vllm_config, torch.zeros(4, 4))  # a new tensor at another address


def test_failed_capture_runs_eagerly_with_one_warning(vllm_config, caplog) -> None:
    wrapper = make(vllm_config, backend=FailingBackend())
    x = torch.zeros(4, 4)
    with caplog.at_level("WARNING", logger="vllm.template"):
        outs = [run(wrapper, vllm_config, x) for _ in range(3)]
    for out in outs:
        torch.testing.assert_close(out, torch.ones(4, 4))
    warnings = [r for r in caplog.records if "capture failed" in r.getMessage()]
    assert len(warnings) == 1
    assert wrapper.entries[BatchDescriptor(num_tokens=4)].eager


def test_capture_outside_capture_phase_is_refused(vllm_config) -> None:
    wrapper = make(vllm_config)
    set_cudagraph_capturing_enabled(False)
    try:
        with pytest.raises(RuntimeError, match="inappropriate"):
            run(wrapper, vllm_config, torch.zeros(4, 4))
    finally:
        set_cudagraph_capturing_enabled(True)


def test_clear_graphs_forces_recapture(vllm_config) -> None:
    wrapper = make(vllm_config)
    x = torch.zeros(4, 4)
    first = run(wrapper, vllm_config, x)
    wrapper.clear_graphs()
    assert run(wrapper, vllm_config, x) is not first


def test_emulated_replay_rejects_shape_changes() -> None:
    backend = CpuGraphEmulation()
    sizes = iter([4, 5])
    graph = backend.capture(lambda: torch.zeros(next(sizes)))
    assert isinstance(graph, CapturedGraph)
    with pytest.raises(RuntimeError, match="not static"):
        backend.replay(graph)


def test_getattr_and_unwrap_reach_the_runnable(vllm_config) -> None:
    wrapper = make(vllm_config)
    assert wrapper.bias is wrapper.runnable.bias
    assert wrapper.unwrap() is wrapper.runnable

"""The device's graph backend piecewise-captures a 16-layer toy decoder (GPU tier).

Attention stays eager between the captured pieces; every batch size 1..8 is
captured once and replayed; outputs equal the eager model bit for bit.
"""

from __future__ import annotations

import pytest
import torch

from vllm_platform_template.devices.gpu.identity import IDENTITY, torch_module

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {IDENTITY.device_type} device"),
]

from toy_decoder import PiecewiseGraphs, ToyConfig, ToyDecoder  # noqa: E402

from vllm_platform_template.devices.gpu.graphs import DeviceGraphBackend  # noqa: E402


@pytest.fixture(scope="module")
def graphs() -> PiecewiseGraphs:
    model = ToyDecoder(ToyConfig())
    runner = PiecewiseGraphs(model, DeviceGraphBackend(torch_module().graph_pool_handle()))
    for batch in range(8, 0, -1):  # largest first, as vLLM captures
        runner.capture(batch)
    return runner


@pytest.mark.parametrize("batch", range(1, 9))
def test_replay_equals_eager(graphs: PiecewiseGraphs, batch: int) -> None:
    torch.manual_seed(batch)
    for _ in range(3):  # new inputs each step: the graph reads the persistent buffer
        x = torch.randn(
            batch, graphs.model.c.hidden, dtype=graphs.model.c.dtype, device=IDENTITY.device_type
        )
        expected = graphs.model.eager_step(x)
        got = graphs.step(x)
        torch_module().synchronize()
        assert torch.equal(got, expected)


def test_one_graph_per_piece_and_size(graphs: PiecewiseGraphs) -> None:
    assert sorted(graphs.graphs) == list(range(1, 9))
    assert all(len(g) == graphs.model.c.layers + 1 for g in graphs.graphs.values())

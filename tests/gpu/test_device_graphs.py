"""The ``cuda`` graph backend piecewise-captures a 16-layer toy decoder (GPU tier).

Attention stays eager between the captured pieces; every batch size 1..8 is
captured once and replayed; outputs equal the eager model bit for bit.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from toy_decoder import PiecewiseGraphs, ToyConfig, ToyDecoder  # noqa: E402

from vllm_platform_template.devices.gpu.graphs import CudaGraphBackend  # noqa: E402


@pytest.fixture(scope="module")
def graphs() -> PiecewiseGraphs:
    model = ToyDecoder(ToyConfig())
    runner = PiecewiseGraphs(model, CudaGraphBackend(torch.cuda.graph_pool_handle()))
    for batch in range(8, 0, -1):  # largest first, as vLLM captures
        runner.capture(batch)
    return runner


@pytest.mark.parametrize("batch", range(1, 9))
def test_replay_equals_eager(graphs: PiecewiseGraphs, batch: int) -> None:
    torch.manual_seed(batch)
    for _ in range(3):  # new inputs each step: the graph reads the persistent buffer
        x = torch.randn(batch, graphs.model.c.hidden, dtype=graphs.model.c.dtype, device="cuda")
        expected = graphs.model.eager_step(x)
        got = graphs.step(x)
        torch.cuda.synchronize()
        assert torch.equal(got, expected)


def test_one_graph_per_piece_and_size(graphs: PiecewiseGraphs) -> None:
    assert sorted(graphs.graphs) == list(range(1, 9))
    assert all(len(g) == graphs.model.c.layers + 1 for g in graphs.graphs.values())

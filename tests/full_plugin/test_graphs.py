"""Piecewise graphs on the CPU reference backend: capture, replay, split, parity."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def graphs_args(**compilation: object) -> tuple[str, ...]:
    config = {"cudagraph_mode": "PIECEWISE", **compilation}
    return ("--engine-args", json.dumps({"compilation_config": config}))


def test_piecewise_graphs_capture_replay_and_match_stock(engine_runs) -> None:
    stock = engine_runs.run("--stock")
    ours = engine_runs.run(*graphs_args())
    assert ours["cudagraph_mode"] == "PIECEWISE"
    assert ours["graph_mode_reason"] == "requested (compilation_config.cudagraph_mode)"
    graphs = ours["graphs"]
    assert graphs["backend"] == "cpu"
    # 2 layers -> 3 compiled pieces; each captured once per configured size.
    assert graphs["captures"] == {"1": 3, "2": 3, "4": 3, "8": 3, "16": 3}
    # 3 prompts decode as a batch padded to 4 tokens: replays of the size-4 graphs.
    assert graphs["replays"].get("4", 0) >= 3 * 20
    assert not graphs["eager_fallbacks"]
    assert ours["tokens"] == stock["tokens"]


def test_graph_split_at_attention(engine_runs) -> None:
    ours = engine_runs.run(*graphs_args())
    assert ours["compile"]["pieces"] == 3  # layers + 1
    assert ours["compile"]["attention_nodes_in_pieces"] == 0  # attention runs eagerly between


def test_capture_sizes_are_overridable(engine_runs) -> None:
    ours = engine_runs.run(*graphs_args(cudagraph_capture_sizes=[1, 3]))
    assert ours["graphs"]["captures"] == {"1": 3, "3": 3}
    assert ours["graphs"]["replays"].get("3", 0) >= 3 * 20  # 3 prompts: exactly size 3


def test_cpu_default_runs_without_graphs(engine_runs) -> None:
    ours = engine_runs.run()
    assert ours["cudagraph_mode"] == "NONE"
    assert not ours["graphs"]["captures"]

"""Tensor and pipeline parallel on two GPUs (GPU tier, stage ``multi``).

vLLM's own distributed runtime (NCCL through ``torch.distributed``, one worker
process per GPU) on the template's GPU platform: TP=2 and PP=2, eager, compiled
and with CUDA graphs (the capture goes through the template communicator's
``graph_capture``, see ``devices/gpu/communicator.py``). fp32 greedy tokens must
equal transformers on one GPU token for token, as the one-GPU engine's do.
"""

from __future__ import annotations

import pytest
import torch
from test_gpu_engine import assert_equals_transformers, gpu

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
]

MODES = {
    "eager": ("--enforce-eager",),
    "compiled": ("--compile-stage", "graph"),
}
GRAPHS = {"none": "NONE", "piecewise": "PIECEWISE", "default": None}


@pytest.fixture(scope="module")
def hf_gpu_greedy(tiny_model_dir):
    from hf_reference import hf_greedy_on

    return hf_greedy_on(tiny_model_dir, "cuda")


def _parallel_run(engine_runs, layout: str, mode: str, graphs: str) -> dict:
    config: dict[str, object] = {layout: 2}
    if graphs != "default":
        config["compilation_config"] = {"cudagraph_mode": GRAPHS[graphs]}
    return engine_runs.run(*gpu(*MODES[mode], **config))


@pytest.mark.parametrize("layout", ["tensor_parallel_size", "pipeline_parallel_size"])
@pytest.mark.parametrize(
    ("mode", "graphs"),
    [("eager", "none"), ("compiled", "none"), ("compiled", "piecewise"), ("compiled", "default")],
)
def test_two_gpus_match_one(engine_runs, hf_gpu_greedy, layout: str, mode: str, graphs: str):
    report = _parallel_run(engine_runs, layout, mode, graphs)
    assert_equals_transformers(report, hf_gpu_greedy)
    if graphs != "none" and mode != "eager":
        captured = sum(report["graphs"]["captures"].values())
        assert captured > 0, report["graphs"]
        assert not report["graphs"]["eager_fallbacks"], report["graphs"]

"""Tensor and pipeline parallel on two devices (GPU tier, ``-m gpu``).

vLLM's own distributed runtime (the identity's ``dist_backend`` through
``torch.distributed``, one worker process per device) on the template's GPU
platform: TP=2 and PP=2, eager, compiled and with graphs (the capture goes
through the template communicator's ``graph_capture``, see
``devices/gpu/communicator.py``). fp32 greedy tokens must
equal transformers on one GPU token for token, as the one-GPU engine's do; bf16
``small`` with TP=2 is held to transformers bf16 on one GPU by the logprob rule;
``serve`` with TP=2 takes the 64-request load and shuts down cleanly.
"""

from __future__ import annotations

import pytest
from bf16_reference import small_model_dir
from serving import check_clean_shutdown, check_concurrent_load, start_server, stop_server
from test_gpu_engine import (
    DEVICE,
    assert_equals_transformers,
    bf16_args,
    check_bf16_close_to_transformers,
    gpu,
)

from vllm_platform_template.devices.gpu.identity import IDENTITY


def _device_count() -> int:
    return IDENTITY.torch_module_or_none().device_count() if IDENTITY.present() else 0


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(_device_count() < 2, reason=f"needs two {DEVICE} devices"),
]

MODES = {"eager": ("--enforce-eager",), "compiled": ("--compile-stage", "graph")}
GRAPHS = {"none": "NONE", "piecewise": "PIECEWISE", "default": None}


@pytest.fixture(scope="module")
def hf_gpu_greedy(tiny_model_dir):
    from hf_reference import hf_greedy_on

    return hf_greedy_on(tiny_model_dir, DEVICE)


def _parallel_run(engine_runs, layout: str, mode: str, graphs: str) -> dict:
    config: dict[str, object] = {layout: 2}
    if graphs != "default":
        config["compilation_config"] = {"cudagraph_mode": GRAPHS[graphs]}
    return engine_runs.run(*gpu(*MODES[mode], **config))


@pytest.mark.parametrize(
    ("layout", "mode", "graphs"),
    [
        ("tensor_parallel_size", "eager", "none"),
        ("tensor_parallel_size", "compiled", "piecewise"),
        ("tensor_parallel_size", "compiled", "default"),
        ("pipeline_parallel_size", "eager", "none"),
        ("pipeline_parallel_size", "compiled", "piecewise"),
    ],
)
def test_two_gpus_match_one(engine_runs, hf_gpu_greedy, layout: str, mode: str, graphs: str):
    report = _parallel_run(engine_runs, layout, mode, graphs)
    assert_equals_transformers(report, hf_gpu_greedy)
    if graphs != "none" and mode != "eager":
        captured = sum(report["graphs"]["captures"].values())
        assert captured > 0, report["graphs"]
        assert not report["graphs"]["eager_fallbacks"], report["graphs"]


def test_tp2_bf16_close_to_one_gpu(engine_runs) -> None:
    report = engine_runs.run(*gpu(*bf16_args(), tensor_parallel_size=2))
    check_bf16_close_to_transformers(report, small_model_dir())


def test_tp2_serve_under_load_and_clean_shutdown(tiny_model_dir, tmp_path) -> None:
    extra = ("--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.1")
    server = start_server(tiny_model_dir, DEVICE, tmp_path / "server.log", extra)
    try:
        check_concurrent_load(server)
        check_clean_shutdown(server)
    finally:
        stop_server(server)

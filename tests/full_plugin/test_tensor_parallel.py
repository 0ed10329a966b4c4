"""Tensor parallelism 2 on the CPU reference backend (gloo, vLLM's CpuCommunicator)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def test_tp2_gives_the_same_tokens_as_tp1(engine_runs) -> None:
    tp1 = engine_runs.run("--enforce-eager")
    tp2 = engine_runs.run(
        "--enforce-eager",
        "--engine-args",
        json.dumps({"tensor_parallel_size": 2}),
        env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"},
    )
    assert tp2["platform"] == tp1["platform"]
    assert tp2["tokens"] == tp1["tokens"]


def test_a_tp2_engine_leaves_dev_shm_as_it_found_it(engine_runs) -> None:
    """The two workers' CPU communicator segments (``<group>-cpushm_<rank>``, 4 MiB each)
    are unlinked when the engine stops; before, every TP=2 engine left both behind
    (``shutdown.unlink_created_cpu_shm``)."""
    tp2 = engine_runs.run(
        "--enforce-eager",
        "--engine-args",
        json.dumps({"tensor_parallel_size": 2}),
        env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"},
    )
    assert tp2["_shm_left"] == []

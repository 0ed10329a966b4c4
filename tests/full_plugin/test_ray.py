"""vLLM's Ray executor on the CPU reference backend (issue 27, item 4).

Tensor parallel 2 through ``distributed_executor_backend="ray"`` (vLLM's default
RayExecutorV2: two Ray actors, gloo between them) must give the tokens of the
multiprocessing executor's TP=2 run, which ``test_tensor_parallel.py`` makes with the
same arguments (one engine start shared through ``engine_runs``). ``RAY_ADDRESS=local``
keeps the run off any Ray cluster on the machine: the platform starts a local Ray
instance declaring its resource (``devices/cpu/ray_workers.py``) and the engine's exit ends it.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

MP_TP2 = ("--enforce-eager", "--engine-args", json.dumps({"tensor_parallel_size": 2}))
RAY_TP2 = (
    "--enforce-eager",
    "--engine-args",
    json.dumps({"tensor_parallel_size": 2, "distributed_executor_backend": "ray"}),
)
BIND = {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}


def test_ray_tp2_gives_the_multiprocessing_tokens(engine_runs) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[cpu,dev,ray]'")
    from vllm_platform_template.devices.cpu.ray_workers import COULD_NOT_START

    mp = engine_runs.run(*MP_TP2, env=BIND)
    try:
        ray_run = engine_runs.run(*RAY_TP2, env={**BIND, "RAY_ADDRESS": "local"})
    except AssertionError as e:  # conftest.EngineRunError: the run exited non-zero
        if COULD_NOT_START in str(e):
            reason = str(e)[str(e).index(COULD_NOT_START) :].splitlines()[0]
            pytest.skip(f"Ray cannot start here: {reason}")
        raise
    # the workers were the template's Ray actors, on the template platform
    assert "TemplateRayWorkerProc" in ray_run["_stderr"]
    assert ray_run["platform"] == mp["platform"]
    assert ray_run["attention_backends"] == mp["attention_backends"] == ["TEMPLATE_ATTN"]
    assert ray_run["tokens"] == mp["tokens"]
    assert ray_run["held_out"]["perplexity"] == pytest.approx(mp["held_out"]["perplexity"])

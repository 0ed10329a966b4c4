"""The GPU platform runs vLLM end to end (GPU tier: ``tools/gpu_tier.sh`` on a CUDA machine).

Every engine here is the template's plain-``Platform`` GPU backend
(``VLLM_TEMPLATE_DEVICE=cuda``) with only the template's Triton kernels and
torch's. Parity is fp32 greedy token for token against Hugging Face
transformers on the same GPU and on the CPU (the CPU backend is held to the
same transformers tokens by ``test_parity.py``), in every mode: eager, both
compiler stages, piecewise CUDA graphs captured by ``TemplateGraphWrapper``,
the fused-model road, the CustomOp kernel road; plus a warm start from the compile cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from hf_reference import hf_greedy_on

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

GPU = ("--device", "cuda")
MAX_TOKENS = 24  # the demo's default


def graphs(**extra: object) -> tuple[str, ...]:
    config = {"compilation_config": {"cudagraph_mode": "PIECEWISE"}, **extra}
    return ("--engine-args", json.dumps(config))


@pytest.fixture(scope="module")
def hf_gpu_greedy(tiny_model_dir):
    return hf_greedy_on(tiny_model_dir, "cuda")


def test_demo_human_output_names_the_gpu_platform(tiny_model_dir) -> None:
    env = {**os.environ, "VLLM_TEMPLATE_DEVICE": "cuda"}
    cmd = [sys.executable, "-m", "vllm_platform_template.cli.main", "demo", *GPU]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "TemplateGpuPlatform" in proc.stdout
    assert "Output:" in proc.stdout


def test_eager_matches_transformers_on_gpu_and_cpu(engine_runs, hf_gpu_greedy, hf_greedy) -> None:
    ours = engine_runs.run(*GPU, "--enforce-eager")
    assert ours["platform"] == "vllm_platform_template.devices.gpu.platform.TemplateGpuPlatform"
    assert ours["attention_backends"] == ["TEMPLATE_ATTN"]
    assert ours["tokens"] == hf_gpu_greedy(ours["prompt_token_ids"], MAX_TOKENS)
    assert ours["tokens"] == hf_greedy(ours["prompt_token_ids"], max_tokens=MAX_TOKENS)


@pytest.mark.parametrize("stage", ["graph", "fusion_only"])
def test_compiled_stages_match_eager(engine_runs, stage: str) -> None:
    eager = engine_runs.run(*GPU, "--enforce-eager")
    ours = engine_runs.run(*GPU, "--compile-stage", stage)
    assert ours["compilation_mode"] == "VLLM_COMPILE"
    assert ours["compile"]["pieces"] >= 3
    assert ours["tokens"] == eager["tokens"]


def test_piecewise_cuda_graphs_capture_replay_and_match(engine_runs) -> None:
    eager = engine_runs.run(*GPU, "--enforce-eager")
    ours = engine_runs.run(*GPU, *graphs())
    assert ours["cudagraph_mode"] == "PIECEWISE"
    g = ours["graphs"]
    assert g["backend"] == "cuda"
    assert sum(g["captures"].values()) > 0
    assert sum(g["replays"].values()) >= MAX_TOKENS
    assert not g["eager_fallbacks"]
    assert ours["tokens"] == eager["tokens"]


def test_fused_model_with_graphs_matches(engine_runs) -> None:
    eager = engine_runs.run(*GPU, "--enforce-eager")
    fused = {"additional_config": {"template": {"model_impl": "fused"}}}
    ours = engine_runs.run(*GPU, "--engine-args", json.dumps(fused))
    assert ours["model_class"].endswith("TemplateFusedLlamaForCausalLM")
    assert ours["tokens"] == eager["tokens"]


def test_warm_start_loads_every_piece(engine_runs, tmp_path_factory) -> None:
    cache = tmp_path_factory.mktemp("gpu-compile-cache")
    cold = engine_runs.run(*GPU, "--compile-stage", "graph", cache_root=cache, label="cold")
    warm = engine_runs.run(*GPU, "--compile-stage", "graph", cache_root=cache, label="warm")
    assert cold["compile"]["pieces"] >= 3
    assert warm["compile"]["pieces"] == 0, "warm start must not call the compiler"
    assert warm["compile"]["cache"]["aot_artifacts_loaded"] >= 1
    assert warm["tokens"] == cold["tokens"]


def test_custom_op_road_matches_the_ir_road(engine_runs) -> None:
    """The road after vLLM drops IR: RMSNorm through forward_oot and the Triton kernels."""
    eager = engine_runs.run(*GPU, "--enforce-eager")
    road = engine_runs.run(*GPU, "--enforce-eager", "--kernel-road", "custom_op")
    assert road["custom_op_layers"]["TemplateRMSNorm"] == ["forward_oot"]
    assert road["ir_ops"]["rms_norm"]["priority"] == ["native"]
    assert road["tokens"] == eager["tokens"]

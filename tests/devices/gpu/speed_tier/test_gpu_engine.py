"""The GPU folder's platform runs vLLM end to end on its device (GPU tier, ``-m gpu``).

Every engine here is the template's plain-``Platform`` GPU backend
(``VLLM_TEMPLATE_DEVICE=<devices/gpu/identity.py's device type>``) with only the
template's Triton kernels and torch's. Each test starts its own engine and
holds it to Hugging Face transformers on the same device, so the tests are
independent and the tier runs them in parallel (pytest-xdist) on one device:
every engine gets a fixed 1 GiB KV cache (``kv_cache_memory_bytes``: no memory
profiling against the other engines), asks for 8% of the device's memory at
start (vLLM checks that much is free), and runs at most 8 sequences (graph
capture sizes 1-16, not vLLM's 512).

- tiny fp32, greedy tokens equal transformers fp32 token for token: eager, both
  compiler stages, compiled + the platform's default graphs (FULL_AND_PIECEWISE:
  decode steps replay FULL graphs, asserted from the runner's counts),
  FULL_DECODE_ONLY, PIECEWISE, the fused model (FULL decode graphs without
  torch.compile), the CustomOp kernel road, vLLM's Transformers backend on its
  hardware-agnostic layers; a warm start calls the compiler zero times;
  held-out perplexity equal to transformers fp32 on the CPU (the CPU backend's
  reference) within a relative 1e-4;
- ``small`` in bf16: close to transformers bf16 on the GPU by vLLM's
  logprob-closeness rule, 8 prompts x 64 tokens;
- faults: a failing graph capture runs that size eagerly with one warning per
  piece and unchanged tokens; a KV cache that cannot fit stops the engine with
  vLLM's message; no GPU visible or a bad device index is refused at the entry point
  with what to do; every run is bounded by a timeout.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from bf16_reference import small_model_dir
from fault_runner import run_with_fault
from hf_reference import decoding_of, hf_greedy_logprobs_on, hf_greedy_on
from logprob_closeness import check_logprobs_close, report_outputs

from vllm_platform_template.devices.gpu.identity import IDENTITY

DEVICE = IDENTITY.device_type
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {DEVICE} device"),
]

MAX_TOKENS = 32  # the demo's default
ENGINE = {"max_num_seqs": 8, "gpu_memory_utilization": 0.08, "kv_cache_memory_bytes": 1 << 30}
FP32_REL_TOL = 1e-4
PLATFORM = "vllm_platform_template.devices.gpu.platform.TemplateGpuPlatform"


def gpu(*args: str, **engine_args: object) -> tuple[str, ...]:
    """Demo arguments for the GPU backend with the tier's engine limits."""
    return ("--device", DEVICE, *args, "--engine-args", json.dumps({**ENGINE, **engine_args}))


@pytest.fixture(scope="module")
def hf_gpu_greedy(tiny_model_dir):
    return hf_greedy_on(tiny_model_dir, DEVICE)


def assert_equals_transformers(report: dict, hf_gpu_greedy) -> None:
    assert report["platform"] == PLATFORM
    expected = hf_gpu_greedy(report["prompt_token_ids"], **decoding_of(report))
    assert report["tokens"] == expected


def test_warm_start_loads_every_piece(engine_runs, tmp_path_factory) -> None:
    """Two engine starts in a row; the slowest test, so it comes first (xdist starts it first).

    No graphs: what is proven is the compiler's cache (graph capture is not cached).
    """
    cache = tmp_path_factory.mktemp("gpu-compile-cache")
    args = gpu("--compile-stage", "graph", compilation_config={"cudagraph_mode": "NONE"})
    cold = engine_runs.run(*args, cache_root=cache, label="cold")
    warm = engine_runs.run(*args, cache_root=cache, label="warm")
    assert cold["compile"]["pieces"] >= 3
    assert warm["compile"]["pieces"] == 0, "warm start must not call the compiler"
    assert warm["compile"]["cache"]["aot_artifacts_loaded"] >= 1
    assert warm["tokens"] == cold["tokens"]
    print(f"init cold {cold['timings']['init_s']} s, warm {warm['timings']['init_s']} s")


def test_bf16_small_close_to_transformers_on_gpu(engine_runs) -> None:
    check_bf16_close_to_transformers(engine_runs.run(*gpu(*bf16_args())), small_model_dir())


def test_demo_human_output_names_the_gpu_platform(tiny_model_dir) -> None:
    env = {**os.environ, "VLLM_TEMPLATE_DEVICE": DEVICE}
    cmd = [sys.executable, "-m", "vllm_platform_template_tools.cli.main", "demo"]
    cmd += gpu("--enforce-eager")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "TemplateGpuPlatform" in proc.stdout
    assert "Output:" in proc.stdout


@pytest.mark.xdist_group("eager")  # shares its engine with the perplexity test
def test_eager_matches_transformers_on_gpu_and_cpu(engine_runs, hf_gpu_greedy, hf_greedy) -> None:
    ours = engine_runs.run(*gpu("--enforce-eager"))
    assert ours["attention_backends"] == ["TEMPLATE_ATTN"]
    assert_equals_transformers(ours, hf_gpu_greedy)
    assert ours["tokens"] == hf_greedy(ours["prompt_token_ids"], **decoding_of(ours))


@pytest.mark.parametrize("stage", ["graph", "fusion_only"])
def test_compiled_stages_without_graphs_match(engine_runs, hf_gpu_greedy, stage: str) -> None:
    ours = engine_runs.run(
        *gpu("--compile-stage", stage, compilation_config={"cudagraph_mode": "NONE"})
    )
    assert ours["compilation_mode"] == "VLLM_COMPILE"
    assert not ours["compile"]["fallbacks"], ours["compile"]["fallback_causes"]
    assert ours["compile"]["pieces"] >= 3
    assert_equals_transformers(ours, hf_gpu_greedy)


JIT_DURING_INFERENCE = re.compile(r"JIT compilation during inference: (\w+)")


def template_triton_kernels() -> set[str]:
    """Names of the GPU folder's Triton kernels."""
    import triton

    from vllm_platform_template.devices.gpu.kernels import (
        activation,
        layernorm,
        paged_attention,
        rotary,
    )

    modules = (activation, layernorm, paged_attention, rotary)
    return {
        name
        for module in modules
        for name, obj in vars(module).items()
        if isinstance(obj, triton.runtime.JITFunction)
    }


def assert_decode_replayed_full_graphs(report: dict) -> None:
    """From the runner: every decode step after the prefill replayed a FULL graph.

    The demo's three prompts prefill in one mixed step, then decode MAX_TOKENS - 1
    steps (a batch of 3, padded to the size-4 graph, while none has stopped); a
    silent fallback to piecewise or eager decode fails here even when tokens match.
    And none of the template's Triton kernels compiled while serving (the planner's
    warm-up reached every variant a step launches).
    """
    full = report["graphs"]["full"]
    assert full["captures"], "no FULL graph was captured"
    assert sum(full["replays"].values()) >= MAX_TOKENS - 1, full
    compiled = set(JIT_DURING_INFERENCE.findall(report["_stderr"]))
    ours = compiled & template_triton_kernels()
    assert not ours, f"the template's kernels compiled while serving: {sorted(ours)}"
    if compiled:  # vLLM's own (its sampler's logprobs kernel, for the perplexity request)
        print(f"vLLM's kernels compiled while serving: {sorted(compiled)}")


def test_default_graphs_capture_replay_and_match(engine_runs, hf_gpu_greedy) -> None:
    """The platform's default: compiled, graph stage, FULL_AND_PIECEWISE (vLLM's default):
    decode steps replay FULL graphs, the prefill runs the piecewise graphs."""
    ours = engine_runs.run(*gpu())
    assert ours["compilation_mode"] == "VLLM_COMPILE"
    assert ours["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    g = ours["graphs"]
    assert g["backend"] == DEVICE
    assert sum(g["captures"].values()) > 0  # the piecewise graphs, for mixed batches
    assert not g["eager_fallbacks"]
    assert_decode_replayed_full_graphs(ours)
    assert_equals_transformers(ours, hf_gpu_greedy)


def test_full_decode_only_matches(engine_runs, hf_gpu_greedy) -> None:
    ours = engine_runs.run(*gpu(compilation_config={"cudagraph_mode": "FULL_DECODE_ONLY"}))
    assert ours["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert not ours["graphs"]["captures"]  # no piecewise graphs: the prefill runs eagerly
    assert_decode_replayed_full_graphs(ours)
    assert_equals_transformers(ours, hf_gpu_greedy)


def test_piecewise_graphs_match(engine_runs, hf_gpu_greedy) -> None:
    ours = engine_runs.run(*gpu(compilation_config={"cudagraph_mode": "PIECEWISE"}))
    assert ours["cudagraph_mode"] == "PIECEWISE"
    assert sum(ours["graphs"]["captures"].values()) > 0
    assert sum(ours["graphs"]["replays"].values()) >= MAX_TOKENS
    assert not ours["graphs"]["full"]["captures"]
    assert_equals_transformers(ours, hf_gpu_greedy)


def test_fused_model_matches(engine_runs, hf_gpu_greedy) -> None:
    """The fused model (no torch.compile): vLLM's default mode becomes FULL_DECODE_ONLY."""
    ours = engine_runs.run(*gpu(additional_config={"template": {"model_impl": "fused"}}))
    assert ours["model_class"].endswith("TemplateFusedLlamaForCausalLM")
    assert ours["compilation_mode"] == "NONE"
    assert ours["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert_decode_replayed_full_graphs(ours)
    assert_equals_transformers(ours, hf_gpu_greedy)


def test_custom_op_road_matches(engine_runs, hf_gpu_greedy) -> None:
    """The road after vLLM drops IR: RMSNorm through forward_oot and the Triton kernels."""
    road = engine_runs.run(*gpu("--enforce-eager", "--kernel-road", "custom_op"))
    assert road["custom_op_layers"]["TemplateRMSNorm"] == ["forward_oot"]
    assert road["ir_ops"]["rms_norm"]["priority"] == ["native"]
    assert_equals_transformers(road, hf_gpu_greedy)


def test_hw_agnostic_road_matches(engine_runs, hf_gpu_greedy) -> None:
    """vLLM's Transformers backend on its hardware-agnostic layers: the template's
    replacements run the Triton kernels (forward_oot), tokens equal transformers."""
    args = gpu("--enforce-eager", model_impl="transformers")
    ours = engine_runs.run(*args, env={"VLLM_USE_HW_AGNOSTIC": "1"})
    assert ours["model_class"].endswith("TransformersForCausalLM")
    assert ours["custom_op_layers"]["TemplateTPAwareRMSNorm"] == ["forward_oot"]
    assert ours["custom_op_layers"]["TemplateHwAgnosticSiluAndMul"] == ["forward_oot"]
    assert_equals_transformers(ours, hf_gpu_greedy)


def _perplexity(logprobs: list[float]) -> float:
    return math.exp(-sum(logprobs) / len(logprobs))


@pytest.mark.xdist_group("eager")
def test_held_out_perplexity_equals_the_cpu_reference(engine_runs, tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    ours = engine_runs.run(*gpu("--enforce-eager"))["held_out"]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    ids = torch.tensor([ours["prompt_token_ids"]])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    cpu = _perplexity(logprobs.gather(1, ids[0, 1:, None]).squeeze(1).tolist())
    print(f"held-out perplexity: GPU {ours['perplexity']:.4f}, transformers fp32 CPU {cpu:.4f}")
    assert math.isclose(ours["perplexity"], cpu, rel_tol=FP32_REL_TOL)


BF16_PROMPTS = [
    "Hello, my name is",
    "The capital of France is",
    "Once upon a time,",
    "The future of AI is",
    "In the beginning",
    "A quick brown fox",
    "Water boils at",
    "My favourite book is",
]
BF16_TOKENS, TOP_K = 64, 5


def bf16_args() -> tuple[str, ...]:
    args = ["--size", "small", "--dtype", "bfloat16", "--enforce-eager"]
    args += [
        "--max-tokens",
        str(BF16_TOKENS),
        "--logprobs",
        str(TOP_K),
        "--repetition-penalty",
        "1",
    ]
    for prompt in BF16_PROMPTS:
        args += ["--prompt", prompt]
    return tuple(args)


def check_bf16_close_to_transformers(report: dict, model_dir: Path) -> None:
    """vLLM's logprob-closeness rule against transformers bf16 on one GPU."""
    assert report["dtype"] == "bfloat16"
    generate = hf_greedy_logprobs_on(model_dir, DEVICE)
    expected = generate(report["prompt_token_ids"], BF16_TOKENS, TOP_K)
    divergences = check_logprobs_close(report_outputs(report), expected, "template", "transformers")
    where = [(d.prompt, d.position) for d in divergences]
    print(f"bf16 vs transformers on the GPU: diverged (prompt, position) {where}")


def test_failed_graph_capture_runs_that_size_eagerly(engine_runs, hf_gpu_greedy, tmp_path) -> None:
    args = gpu(compilation_config={"cudagraph_mode": "PIECEWISE"})
    report = run_with_fault(engine_runs, "capture", *args, cache_root=tmp_path)
    assert "error" not in report, report.get("traceback")
    graphs = report["graphs"]
    pieces = graphs["eager_fallbacks"].get("4")
    assert "4" not in graphs["captures"] and pieces, graphs
    assert graphs["captures"]["8"] == pieces
    assert report["_stderr"].count("graph capture failed") == pieces  # once per piece
    assert_equals_transformers(report, hf_gpu_greedy)  # the 3-prompt batch (size 4) ran eagerly


def _demo(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "vllm_platform_template_tools.cli.main", "demo", *args]
    full_env = {**os.environ, "VLLM_TEMPLATE_DEVICE": DEVICE, **env}
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=300)


def test_kv_cache_that_cannot_fit_names_the_settings() -> None:
    proc = _demo(gpu("--enforce-eager", kv_cache_memory_bytes=4096), {})
    assert proc.returncode != 0
    assert "max_model_len" in proc.stderr or "gpu_memory_utilization" in proc.stderr, proc.stderr[
        -3000:
    ]


@pytest.mark.parametrize("visible", ["", "99"], ids=["no-gpu-visible", "bad-device-index"])
def test_no_usable_gpu_is_refused_with_what_to_do(visible: str) -> None:
    proc = _demo(gpu("--enforce-eager"), {IDENTITY.visible_devices_env: visible})
    assert proc.returncode != 0
    assert f"sees no {DEVICE} device" in proc.stderr, proc.stderr[-3000:]
    assert "VLLM_TEMPLATE_DEVICE=cpu" in proc.stderr

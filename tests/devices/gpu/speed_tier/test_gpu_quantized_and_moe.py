"""Quantized and mixture-of-experts models on the GPU folder's platform (GPU tier, ``-m gpu``).

The platform's default mode (compiled, FULL_AND_PIECEWISE): decode steps replay FULL
graphs holding the Triton kernels of ``template::fused_moe`` (grouped GEMM),
``template::fused_moe_w8a8_int8`` (the same on int8 operands) and
``template::w8a8_int8_linear`` (int8 tensor-core GEMM).

- ``tiny-moe`` fp32: greedy tokens equal transformers fp32 on the GPU and on the CPU;
- tiny's and tiny-moe's W8A8 checkpoints: close by vLLM's logprob-closeness rule to
  transformers with the dequantized weights and each quantized layer's input rounded
  per token to int8 (the engine's arithmetic, ``hf_reference.quantize_activations``);
- every MoE and quantized layer is the template's; its op ran on the device (counted
  in the worker: eager prefill calls and graph captures, which replays do not repeat).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hf_reference import decoding_of, hf_greedy_on, w8a8_expected_outputs
from logprob_closeness import check_logprobs_close, report_outputs
from test_gpu_engine import DEVICE, ENGINE, PLATFORM, assert_decode_replayed_full_graphs

from vllm_platform_template.devices.gpu.identity import IDENTITY

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {DEVICE} device"),
]
TOP_LOGPROBS = 5


def gpu(*args: str) -> tuple[str, ...]:
    return ("--device", DEVICE, *args, "--engine-args", json.dumps(ENGINE))


def test_moe_replays_full_graphs_and_matches_transformers(engine_runs, hf_greedy_of) -> None:
    ours = engine_runs.run(*gpu("--size", "tiny-moe"))
    assert ours["platform"] == PLATFORM
    assert ours["moe_methods"] == {"TemplateFusedMoEMethod": 2}
    assert ours["template_op_calls"]["fused_moe"].get(DEVICE, 0) > 0
    assert_decode_replayed_full_graphs(ours)
    model_dir = Path(ours["model"])
    expected = hf_greedy_on(model_dir, DEVICE)(ours["prompt_token_ids"], **decoding_of(ours))
    assert ours["tokens"] == expected
    assert ours["tokens"] == hf_greedy_of(model_dir)(ours["prompt_token_ids"], **decoding_of(ours))


def _close_to_transformers_with_int8_activations(ours: dict, name: str) -> None:
    expected = w8a8_expected_outputs(ours, TOP_LOGPROBS, DEVICE)
    divergences = check_logprobs_close(report_outputs(ours), expected, "template", "transformers")
    print(f"{name} on {DEVICE}: {len(divergences)} of 3 prompts diverged (close): {divergences}")


def test_w8a8_replays_full_graphs_close_to_transformers(engine_runs) -> None:
    ours = engine_runs.run(*gpu("--quantized", "--logprobs", str(TOP_LOGPROBS)))
    assert ours["platform"] == PLATFORM
    assert ours["quantized_linear_kernels"] == {"TemplateInt8LinearKernel": 8}
    assert ours["template_op_calls"]["w8a8_int8_linear"].get(DEVICE, 0) > 0
    assert_decode_replayed_full_graphs(ours)
    _close_to_transformers_with_int8_activations(ours, "W8A8")


def test_w8a8_moe_replays_full_graphs_close_to_transformers(engine_runs) -> None:
    ours = engine_runs.run(*gpu("--size", "tiny-moe", "--quantized", "--logprobs", "5"))
    assert ours["platform"] == PLATFORM
    assert ours["moe_methods"] == {"TemplateInt8FusedMoEMethod": 2}
    assert ours["quantized_linear_kernels"] == {"TemplateInt8LinearKernel": 4}
    assert ours["template_op_calls"]["fused_moe_w8a8_int8"].get(DEVICE, 0) > 0
    assert_decode_replayed_full_graphs(ours)
    _close_to_transformers_with_int8_activations(ours, "W8A8 tiny-moe")

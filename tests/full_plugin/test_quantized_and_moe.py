"""Quantized and mixture-of-experts models on the template CPU platform, on its kernels.

- ``tiny-moe`` (Mixtral architecture, 4 experts, top-2; fp32): greedy tokens equal
  transformers' and stock vLLM CPU's, token for token, and its held-out perplexity
  equals stock's; every MoE layer is served by the template's monolithic method and
  ``template::fused_moe`` ran (counted in the worker). The router's top-2 margin on
  the very tokens decoded is checked first: a near-tie would make fp32 parity luck.
- tiny's W8A8 INT8 checkpoint (compressed-tensors, written by the project): every
  linear layer runs ``TemplateInt8LinearKernel`` (``template::w8a8_int8_linear``,
  counted); its tokens are judged by vLLM's logprob-closeness rule against stock vLLM
  CPU running the same checkpoint (oneDNN int8) and against transformers with the
  dequantized weights and each quantized layer's input rounded per token to int8 (the
  engines' arithmetic; with fp activations the tokens part at 13-26 of 32 here, with
  the rounding they were equal).
- tiny-moe's W8A8 INT8 checkpoint: its experts run ``TemplateInt8FusedMoEMethod``
  (``template::fused_moe_w8a8_int8``, counted) and its attention projections
  ``TemplateInt8LinearKernel``; judged by the closeness rule against the same
  transformers reference (each expert's two inputs rounded too). Stock vLLM CPU is no
  reference here: it has no INT8 experts kernel for these CPUs ("No Int8 MoE backend
  supports the deployment configuration"; its ``CPUExpertsInt8`` needs AMX).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hf_reference import decoding_of, w8a8_expected_outputs
from logprob_closeness import check_logprobs_close, report_outputs

pytestmark = pytest.mark.e2e

TEMPLATE_CPU = "vllm_platform_template.devices.cpu.platform.TemplateCpuPlatform"
MOE = ("--size", "tiny-moe")
QUANTIZED = ("--quantized", "--logprobs", "5", "--no-perplexity")
TOP_LOGPROBS = 5
# The router's smallest gap between a token's 2nd and 3rd expert probability that fp32
# parity can rest on: implementations differ in the last bits of the logits (~1e-7).
MIN_ROUTER_MARGIN = 1e-5


@pytest.fixture(scope="module")
def moe_runs(engine_runs) -> tuple[dict, dict]:
    return engine_runs.run(*MOE), engine_runs.run("--stock", *MOE)


@pytest.fixture(scope="module")
def quantized_runs(engine_runs) -> tuple[dict, dict]:
    return engine_runs.run(*QUANTIZED), engine_runs.run("--stock", *QUANTIZED)


@pytest.fixture(scope="module")
def quantized_moe_run(engine_runs) -> dict:
    return engine_runs.run(*MOE, *QUANTIZED)


def _transformers(model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


def _router_margins(model, sequences: list[list[int]]) -> list[float]:
    """Smallest (k-th minus (k+1)-th) expert probability per layer over ``sequences``."""
    import torch

    top_k = model.config.num_experts_per_tok
    margins: dict[int, float] = {}
    hooks = []
    for index, layer in enumerate(model.model.layers):

        def record(module, inputs, output, index=index) -> None:
            probs = torch.softmax(output[0].float(), dim=-1)
            top = torch.topk(probs, top_k + 1, dim=-1).values
            gap = float((top[:, top_k - 1] - top[:, top_k]).min())
            margins[index] = min(gap, margins.get(index, 1.0))

        hooks.append(layer.mlp.gate.register_forward_hook(record))
    try:
        with torch.no_grad():
            for ids in sequences:
                model(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    return [margins[i] for i in sorted(margins)]


def test_moe_layers_run_the_template_kernel(moe_runs) -> None:
    ours, stock = moe_runs
    assert ours["platform"] == TEMPLATE_CPU
    assert ours["moe_methods"] == {"TemplateFusedMoEMethod": 2}
    calls = ours["template_op_calls"]["fused_moe"].get("cpu", 0)
    # every layer on every forward: at least the 31 one-token steps after the prefill
    assert calls >= 2 * 31, ours["template_op_calls"]
    assert ours["template_op_calls"]["w8a8_int8_linear"] == {}
    assert "moe_methods" not in stock  # the plugin was inactive there


def test_moe_router_margins_leave_no_near_tie(moe_runs) -> None:
    ours, _ = moe_runs
    model = _transformers(Path(ours["model"]))
    sequences = [p + t for p, t in zip(ours["prompt_token_ids"], ours["tokens"], strict=True)]
    margins = _router_margins(model, sequences)
    assert min(margins) > MIN_ROUTER_MARGIN, margins


def test_moe_tokens_equal_transformers_and_stock(moe_runs, hf_greedy_of) -> None:
    ours, stock = moe_runs
    assert ours["tokens"] == stock["tokens"]
    expected = hf_greedy_of(Path(ours["model"]))(ours["prompt_token_ids"], **decoding_of(ours))
    assert ours["tokens"] == expected


def test_moe_perplexity_equals_stock(moe_runs) -> None:
    ours, stock = moe_runs
    assert ours["held_out"]["prompt_token_ids"] == stock["held_out"]["prompt_token_ids"]
    assert ours["held_out"]["perplexity"] == pytest.approx(stock["held_out"]["perplexity"], 1e-4)


def test_quantized_layers_run_the_template_kernel(quantized_runs) -> None:
    ours, stock = quantized_runs
    assert ours["platform"] == TEMPLATE_CPU
    # per layer: qkv_proj, o_proj, gate_up_proj, down_proj (lm_head stays fp32)
    assert ours["quantized_linear_kernels"] == {"TemplateInt8LinearKernel": 8}
    calls = ours["template_op_calls"]["w8a8_int8_linear"].get("cpu", 0)
    assert calls >= 8 * 31, ours["template_op_calls"]
    assert "quantized_linear_kernels" not in stock


def test_quantized_close_to_stock(quantized_runs) -> None:
    ours, stock = quantized_runs
    check_logprobs_close(report_outputs(ours), report_outputs(stock), "template", "stock")


def _close_to_transformers_with_int8_activations(ours: dict) -> None:
    expected = w8a8_expected_outputs(ours, TOP_LOGPROBS)
    check_logprobs_close(report_outputs(ours), expected, "template", "transformers")


def test_quantized_close_to_transformers_with_the_same_arithmetic(quantized_runs) -> None:
    _close_to_transformers_with_int8_activations(quantized_runs[0])


def test_quantized_moe_runs_the_template_kernels(quantized_moe_run) -> None:
    ours = quantized_moe_run
    assert ours["platform"] == TEMPLATE_CPU
    assert ours["moe_methods"] == {"TemplateInt8FusedMoEMethod": 2}
    # per layer: qkv_proj and o_proj (the router and lm_head stay fp32)
    assert ours["quantized_linear_kernels"] == {"TemplateInt8LinearKernel": 4}
    calls = ours["template_op_calls"]
    assert calls["fused_moe_w8a8_int8"].get("cpu", 0) >= 2 * 31, calls
    assert calls["w8a8_int8_linear"].get("cpu", 0) >= 4 * 31, calls
    assert calls["fused_moe"] == {}  # the fp experts' op did not serve these layers


def test_quantized_moe_close_to_transformers_with_the_same_arithmetic(quantized_moe_run) -> None:
    _close_to_transformers_with_int8_activations(quantized_moe_run)

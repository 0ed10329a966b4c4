"""bf16 parity of the template platform with stock vLLM and transformers, by vLLM's rule.

Two correct kernels round bf16 differently, so greedy tokens may part; vLLM's own
tests then require that where the sequences first differ, each token is in the
other's top-k logprobs (``tests/logprob_closeness.py``). The embedded ``small``
model (random weights, bf16 checkpoint), 8 prompts, 64 tokens. fp32 token-for-token
parity is in ``test_parity.py``.
"""

from __future__ import annotations

import json

import pytest
from bf16_reference import small_model_dir
from hf_reference import hf_greedy_logprobs_on
from logprob_closeness import check_logprobs_close, report_outputs

from vllm_platform_template.devices.cpu import vllm_cpu_build

pytestmark = pytest.mark.e2e

TOP_K = 5
MAX_TOKENS = 64
PROMPTS = [
    "Hello, my name is",
    "The capital of France is",
    "Once upon a time,",
    "The future of AI is",
    "In the beginning",
    "A quick brown fox",
    "Water boils at",
    "My favourite book is",
]


@pytest.fixture(scope="module")
def hf_greedy_logprobs():
    return hf_greedy_logprobs_on(small_model_dir())


# The one bf16 rule (the demo's and test_perplexity.py's too): every build of
# vLLM's CPU kernels runs bf16; only a process with none loaded cannot.
_BF16_PROBLEM = vllm_cpu_build.bf16_problem(vllm_cpu_build.load_cpu_kernels())
needs_bf16 = pytest.mark.skipif(_BF16_PROBLEM is not None, reason=str(_BF16_PROBLEM))


def _run(engine_runs, *extra: str) -> dict:
    args = ["--size", "small", "--dtype", "bfloat16", "--enforce-eager"]
    args += ["--max-tokens", str(MAX_TOKENS), "--logprobs", str(TOP_K), "--repetition-penalty", "1"]
    for prompt in PROMPTS:
        args += ["--prompt", prompt]
    return engine_runs.run(*args, *extra)


def _report(divergences: list) -> str:
    return json.dumps([(d.prompt, d.position) for d in divergences])


@needs_bf16
def test_bf16_template_close_to_stock(engine_runs) -> None:
    stock = _run(engine_runs, "--stock")
    ours = _run(engine_runs)
    assert ours["dtype"] == stock["dtype"] == "bfloat16"
    assert ours["platform"].endswith("TemplateCpuPlatform")
    divergences = check_logprobs_close(
        report_outputs(ours), report_outputs(stock), "template", "stock"
    )
    print(f"bf16 template vs stock: diverged (prompt, position) {_report(divergences)}")


@needs_bf16
def test_bf16_template_close_to_transformers(engine_runs, hf_greedy_logprobs) -> None:
    ours = _run(engine_runs)
    expected = hf_greedy_logprobs(ours["prompt_token_ids"], MAX_TOKENS, TOP_K)
    divergences = check_logprobs_close(report_outputs(ours), expected, "template", "transformers")
    print(f"bf16 template vs transformers: diverged (prompt, position) {_report(divergences)}")

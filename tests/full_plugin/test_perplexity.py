"""Accuracy as evaluation harnesses measure it: perplexity of a held-out passage.

Every demo run scores chapter 60 of Pride and Prejudice (never seen in
training) through vLLM's ``prompt_logprobs``. The trained tiny model must score
it the same on the template platform, on stock vLLM's CPU platform (plugin
inactive, separate process) and in transformers:

- fp32: perplexities within a relative 1e-4 and every token's log-probability
  within 1e-3 (the same model in the same precision; only summation order
  differs between the kernels).
- bf16: perplexities within a relative 2% of each other, and within 5% of the
  fp32 perplexity. bf16 keeps 8 bits of mantissa: two correct kernels round
  differently, so per-token equality is the wrong test; over ~200 tokens the
  differences average out (transformers' bf16 perplexity differs from its fp32
  one by well under 1% on this model, measured on the CPU). Runs wherever one of
  vLLM's CPU kernel builds loaded (each runs bf16: ``vllm_cpu_build.bf16_problem``).

The fp32 runs are the same engine runs as test_parity.py's (shared fixtures),
so this file costs no extra engine start there.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from vllm_platform_template.devices.cpu import vllm_cpu_build

pytestmark = pytest.mark.e2e

FP32_REL_TOL = 1e-4
FP32_TOKEN_ABS_TOL = 1e-3
BF16_REL_TOL = 0.02
BF16_VS_FP32_REL_TOL = 0.05
# A random-weight model of this vocabulary scores in the thousands; the trained
# model about 44 (the tests here print it). At most 60 is the goal the
# shipped weights meet: anything above means other weights ran.
TRAINED_MAX_PERPLEXITY = 60.0


@pytest.fixture(scope="session")
def hf_logprobs(tiny_model_dir: Path):
    """Log-probability of each prompt token after the first, computed by transformers."""
    from transformers import AutoModelForCausalLM

    models: dict[torch.dtype, torch.nn.Module] = {}

    def score(token_ids: list[int], dtype: torch.dtype) -> list[float]:
        if dtype not in models:
            models[dtype] = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=dtype).eval()
        ids = torch.tensor([token_ids])
        with torch.no_grad():
            logits = models[dtype](ids).logits[0, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        return logprobs.gather(1, ids[0, 1:, None]).squeeze(1).tolist()

    return score


def _perplexity(logprobs: list[float]) -> float:
    return math.exp(-sum(logprobs) / len(logprobs))


def _assert_rel_close(a: float, b: float, rel: float, what: str) -> None:
    assert abs(a - b) <= rel * abs(b), f"{what}: {a:.6f} vs {b:.6f} (relative tolerance {rel})"


def test_fp32_perplexity_matches_stock_and_transformers(engine_runs, hf_logprobs) -> None:
    stock = engine_runs.run("--stock", "--enforce-eager")["held_out"]
    ours = engine_runs.run("--enforce-eager")["held_out"]
    assert ours["prompt_token_ids"] == stock["prompt_token_ids"]
    assert len(ours["token_logprobs"]) > 100
    hf = hf_logprobs(ours["prompt_token_ids"], torch.float32)

    assert ours["perplexity"] < TRAINED_MAX_PERPLEXITY, ours["perplexity"]
    _assert_rel_close(ours["perplexity"], stock["perplexity"], FP32_REL_TOL, "template vs stock")
    _assert_rel_close(ours["perplexity"], _perplexity(hf), FP32_REL_TOL, "template vs HF")
    worst = max(abs(a - b) for a, b in zip(ours["token_logprobs"], hf, strict=True))
    assert worst <= FP32_TOKEN_ABS_TOL, f"largest per-token logprob difference {worst}"


def test_compiled_perplexity_matches_eager(engine_runs) -> None:
    eager = engine_runs.run("--enforce-eager")["held_out"]
    compiled = engine_runs.run()["held_out"]
    _assert_rel_close(compiled["perplexity"], eager["perplexity"], FP32_REL_TOL, "compiled")


def test_bf16_perplexity_matches_stock_and_transformers(engine_runs, hf_logprobs) -> None:
    problem = vllm_cpu_build.bf16_problem(vllm_cpu_build.load_cpu_kernels())
    if problem:
        pytest.skip(problem)  # the demo's and test_bf16_parity.py's rule too
    fp32 = engine_runs.run("--enforce-eager")["held_out"]["perplexity"]
    stock = engine_runs.run("--stock", "--enforce-eager", "--dtype", "bfloat16")["held_out"]
    ours = engine_runs.run("--enforce-eager", "--dtype", "bfloat16")["held_out"]
    hf = _perplexity(hf_logprobs(ours["prompt_token_ids"], torch.bfloat16))

    _assert_rel_close(ours["perplexity"], stock["perplexity"], BF16_REL_TOL, "bf16 template/stock")
    _assert_rel_close(ours["perplexity"], hf, BF16_REL_TOL, "bf16 template vs HF")
    _assert_rel_close(ours["perplexity"], fp32, BF16_VS_FP32_REL_TOL, "bf16 vs fp32")

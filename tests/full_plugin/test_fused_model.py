"""The manual-fusion road: the plugin's own Llama with hand-fused ops, no compilation."""

from __future__ import annotations

import json

import pytest
from hf_reference import decoding_of

pytestmark = pytest.mark.e2e

FUSED = ("--engine-args", json.dumps({"additional_config": {"template": {"model_impl": "fused"}}}))


def test_fused_model_matches_stock_and_transformers(engine_runs, hf_greedy) -> None:
    stock = engine_runs.run("--stock", "--enforce-eager")
    ours = engine_runs.run(*FUSED)
    assert ours["model_class"].endswith("models.llama.model.TemplateFusedLlamaForCausalLM")
    assert ours["compilation_mode"] == "NONE"
    assert ours["attention_backends"] == ["TEMPLATE_ATTN"]
    assert ours["tokens"] == stock["tokens"]
    assert ours["tokens"] == hf_greedy(ours["prompt_token_ids"], **decoding_of(ours))


def test_default_stays_vllms_model(engine_runs) -> None:
    ours = engine_runs.run("--enforce-eager")
    assert ours["model_class"].endswith("vllm.model_executor.models.llama.LlamaForCausalLM")

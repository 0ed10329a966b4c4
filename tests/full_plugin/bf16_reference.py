"""The embedded ``small`` model, the bf16 end-to-end tests' subject (its transformers
reference is ``hf_reference.hf_greedy_logprobs_on``)."""

from __future__ import annotations

from pathlib import Path

from vllm_platform_template_tools.embedded_model import ensure_model


def small_model_dir() -> Path:
    return ensure_model("small")

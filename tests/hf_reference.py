"""Hugging Face transformers as the reference generator (shared by the CPU and device e2e tests).

On ``sys.path`` through ``tests/conftest.py`` (pytest's prepend import mode).
"""

from __future__ import annotations

from pathlib import Path


def decoding_of(report: dict) -> dict:
    """``max_tokens`` and ``repetition_penalty`` of a demo report's run, for ``generate``."""
    return {
        "max_tokens": len(report["tokens"][0]),
        "repetition_penalty": report["sampling"]["repetition_penalty"],
    }


def hf_greedy_on(model_dir: Path, device: str):
    """Greedy continuation of token-id prompts by Hugging Face transformers (fp32) on ``device``.

    ``repetition_penalty`` has vLLM's semantics in transformers too (positive logits
    of tokens in the prompt or output divided by it, negative ones multiplied).
    """
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    model.eval()

    def generate(
        prompt_token_ids: list[list[int]], max_tokens: int, repetition_penalty: float = 1.0
    ) -> list[list[int]]:
        results = []
        for ids in prompt_token_ids:
            with torch.no_grad():
                out = model.generate(
                    torch.tensor([ids], device=device),
                    max_new_tokens=max_tokens,
                    min_new_tokens=max_tokens,
                    do_sample=False,
                    repetition_penalty=repetition_penalty,
                    pad_token_id=model.config.eos_token_id,
                )
            results.append(out[0, len(ids) :].tolist())
        return results

    return generate

"""bf16 reference of the end-to-end tests: transformers' greedy decode of the embedded
``small`` model with the top-k logprobs of each step, in bf16 (the reference of vLLM's
logprob-closeness rule). The test modules that judge bf16 make their fixtures of it.
"""

from __future__ import annotations

from pathlib import Path

from vllm_platform_template.embedded_model import ensure_model


def small_model_dir() -> Path:
    return ensure_model("small")


def hf_greedy_logprobs_of(model_dir: Path, device: str = "cpu"):
    """Greedy continuation with the top-k logprobs of each step, transformers in bf16 on
    ``device``."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    model = model.to(device).eval()

    def generate(
        prompt_token_ids: list[list[int]], max_tokens: int, k: int
    ) -> list[tuple[list[int], list[dict[int, float]]]]:
        results = []
        for ids in prompt_token_ids:
            with torch.no_grad():
                out = model.generate(
                    torch.tensor([ids], device=device),
                    max_new_tokens=max_tokens,
                    min_new_tokens=max_tokens,
                    do_sample=False,
                    pad_token_id=model.config.eos_token_id,
                    output_logits=True,
                    return_dict_in_generate=True,
                )
            tokens = out.sequences[0, len(ids) :].tolist()
            steps = []
            for logits in out.logits:
                logprobs = torch.log_softmax(logits[0].float(), dim=-1)
                top = torch.topk(logprobs, k)
                steps.append(dict(zip(top.indices.tolist(), top.values.tolist(), strict=True)))
            results.append((tokens, steps))
        return results

    return generate

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


def _greedy(model, ids: list[int], device: str, max_tokens: int, **options):
    """transformers' greedy ``generate`` of exactly ``max_tokens`` tokens after ``ids``."""
    import torch

    with torch.no_grad():
        return model.generate(
            torch.tensor([ids], device=device),
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            do_sample=False,
            pad_token_id=model.config.eos_token_id,
            **options,
        )


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
        return [
            _greedy(model, ids, device, max_tokens, repetition_penalty=repetition_penalty)[
                0, len(ids) :
            ].tolist()
            for ids in prompt_token_ids
        ]

    return generate


def hf_greedy_logprobs_on(model_dir: Path, device: str = "cpu"):
    """Greedy continuation with the top-k logprobs of each step, transformers in bf16 on
    ``device`` (the reference of vLLM's logprob-closeness rule)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    return greedy_logprobs_of(model.to(device).eval(), device)


def hf_dequantized_greedy_logprobs_on(model_dir: Path, device: str = "cpu"):
    """:func:`greedy_logprobs_of` transformers fp32 with the weights a W8A8 checkpoint of the
    embedded writer stands for (``q * scale``): the same model, unquantized activations."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    from vllm_platform_template_tools.embedded_model.compressed_tensors import dequantized

    config = AutoConfig.from_pretrained(model_dir)
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = load_file(str(model_dir / "model.safetensors"))
    model.load_state_dict(dequantized(state, torch.float32))
    return greedy_logprobs_of(model.to(device).eval(), device)


def greedy_logprobs_of(model, device: str = "cpu"):
    """``generate(prompt_token_ids, max_tokens, k, repetition_penalty=1.0)``: greedy
    continuations by the transformers ``model`` with the top-k logprobs of each step."""
    import torch

    def generate(
        prompt_token_ids: list[list[int]], max_tokens: int, k: int, repetition_penalty: float = 1.0
    ) -> list[tuple[list[int], list[dict[int, float]]]]:
        results = []
        for ids in prompt_token_ids:
            out = _greedy(
                model,
                ids,
                device,
                max_tokens,
                output_logits=True,
                return_dict_in_generate=True,
                repetition_penalty=repetition_penalty,
            )
            steps = []
            for logits in out.logits:
                top = torch.topk(torch.log_softmax(logits[0].float(), dim=-1), k)
                steps.append(dict(zip(top.indices.tolist(), top.values.tolist(), strict=True)))
            results.append((out.sequences[0, len(ids) :].tolist(), steps))
        return results

    return generate

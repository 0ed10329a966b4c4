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


def hf_dequantized_greedy_logprobs_on(
    model_dir: Path, device: str = "cpu", int8_activations: bool = False
):
    """:func:`greedy_logprobs_of` transformers fp32 with the weights a W8A8 checkpoint of the
    embedded writer stands for (``q * scale``): the same model, unquantized activations.
    The dequantized checkpoint is loaded by ``from_pretrained`` (a Mixtral's per-expert
    names become transformers' stacked expert tensors there, as for any checkpoint).

    ``int8_activations``: every quantized layer's input also rounded per token to int8
    and back (:func:`quantize_activations`): the W8A8 engines' arithmetic, up to float
    rounding (transformers sums fp32 products where they sum integers)."""
    import json
    import tempfile

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from vllm_platform_template_tools.embedded_model.compressed_tensors import dequantized

    config = json.loads((model_dir / "config.json").read_text())
    del config["quantization_config"]
    state = load_file(str(model_dir / "model.safetensors"))
    with tempfile.TemporaryDirectory(prefix="dequantized-") as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        save_file(dequantized(state, torch.float32), str(Path(tmp) / "model.safetensors"))
        model = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)
    if int8_activations:
        quantize_activations(model)
    return greedy_logprobs_of(model.to(device).eval(), device)


def w8a8_expected_outputs(report: dict, top_logprobs: int, device: str = "cpu") -> list:
    """What transformers with the same int8 arithmetic (:func:`hf_dequantized_greedy_logprobs_on`,
    ``int8_activations``) decodes for a W8A8 demo report's prompts and settings, with the
    top-``top_logprobs`` logprobs of each step: the reference of the closeness rule."""
    decoding = decoding_of(report)
    generate = hf_dequantized_greedy_logprobs_on(
        Path(report["model"]), device, int8_activations=True
    )
    return generate(
        report["prompt_token_ids"],
        decoding["max_tokens"],
        top_logprobs,
        repetition_penalty=decoding["repetition_penalty"],
    )


def quantize_activations(model) -> None:
    """Round the input of every linear layer the W8A8 writer quantized (and of each
    Mixtral expert's two projections) per token to int8 and back, as W8A8 kernels do."""
    import types

    import torch
    import torch.nn.functional as F

    from vllm_platform_template.reference_kernels.int8_linear import per_token_quant_int8
    from vllm_platform_template_tools.embedded_model.compressed_tensors import is_quantized

    def rounded(x: torch.Tensor) -> torch.Tensor:
        q, scale = per_token_quant_int8(x.reshape(-1, x.shape[-1]))
        return (q.float() * scale).to(x.dtype).reshape(x.shape)

    def experts_forward(self, hidden_states, top_k_index, top_k_weights):
        # every expert on every token, weighted by 0 where not chosen (the reference's way)
        dense = torch.zeros(
            hidden_states.shape[0], self.num_experts, dtype=torch.float32,
            device=hidden_states.device,
        )  # fmt: skip
        dense.scatter_(1, top_k_index, top_k_weights.float())
        x = rounded(hidden_states)
        out = torch.zeros_like(hidden_states)
        for e in range(self.num_experts):
            gate, up = F.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(rounded(self.act_fn(gate) * up), self.down_proj[e])
            out = out + y * dense[:, e : e + 1].to(y.dtype)
        return out

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and is_quantized(f"{name}.weight"):
            module.register_forward_pre_hook(lambda m, args: (rounded(args[0]), *args[1:]))
        elif hasattr(module, "gate_up_proj") and hasattr(module, "down_proj"):
            module.forward = types.MethodType(experts_forward, module)


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

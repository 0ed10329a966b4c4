"""One LoRA engine on the embedded tiny model: two adapters, mixed in a batch and swapped.

    python tests/full_plugin/lora_runner.py DEVICE OUT_DIR     # DEVICE: cpu (template) or stock

Writes two PEFT adapters (rank 8 on every layer's q_proj and v_proj, seeded random
weights large enough to change greedy tokens) into ``OUT_DIR``, starts one engine
(fp32, greedy, ``enable_lora``, ``max_loras=2``) and prints one JSON report line: the
greedy token ids of each request - the base model, adapter 1 and adapter 2 together in
one batch, then the two adapters swapped over the prompts - with the platform, the
punica wrapper vLLM chose and the LoRA layer classes that wrap the model's projections.
``tests/full_plugin/test_lora.py`` runs it on the template and on stock vLLM CPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PROMPTS = ["It is a truth universally acknowledged,", "Elizabeth walked on"]
MAX_TOKENS = 16
RANK = 8


def write_adapter(model_dir: Path, out: Path, seed: int) -> Path:
    """A PEFT LoRA adapter of the tiny model: q_proj and v_proj of every layer."""
    import torch
    from safetensors.torch import save_file

    config = json.loads((model_dir / "config.json").read_text())
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    outputs = {"q_proj": config["num_attention_heads"] * head_dim,
               "v_proj": config["num_key_value_heads"] * head_dim}  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(layers):
        for proj, size in outputs.items():
            name = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            tensors[f"{name}.lora_A.weight"] = torch.randn(RANK, hidden, generator=gen) / 4
            tensors[f"{name}.lora_B.weight"] = torch.randn(size, RANK, generator=gen) / 4
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": 2 * RANK,
        "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
        "target_modules": sorted(outputs), "base_model_name_or_path": str(model_dir),
    }))  # fmt: skip
    return out


def main(device: str, out_dir: Path) -> None:
    from vllm_platform_template_tools.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template_tools.embedded_model import ensure_model

    select_device(None if device == "stock" else device)
    logs_to_stderr()
    model_dir = ensure_model("tiny")
    adapters = [write_adapter(model_dir, out_dir / f"adapter{i}", seed=i) for i in (1, 2)]
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    llm = LLM(model=str(model_dir), dtype="float32", seed=0, enable_lora=True, max_loras=2,
              max_lora_rank=RANK, max_model_len=512, kv_cache_memory_bytes=256 << 20,
              enable_prefix_caching=False)  # fmt: skip
    params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
    lora = [LoRARequest(f"adapter{i + 1}", i + 1, str(path)) for i, path in enumerate(adapters)]

    def ids(prompts: list[str], requests: list[LoRARequest | None]) -> list[list[int]]:
        outputs = llm.generate(prompts, params, lora_request=requests, use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outputs]

    report = {
        # each alone first: the base model, then each adapter, a batch each
        "alone": [ids(PROMPTS, [request] * len(PROMPTS)) for request in (None, *lora)],
        # the base model and both adapters in one batch
        "mixed": ids(PROMPTS * 3, [None, None, lora[0], lora[0], lora[1], lora[1]]),
        # the adapters swapped over the prompts, in another step
        "swapped": ids(PROMPTS, [lora[1], lora[0]]),
    }
    report.update(llm.collective_rpc(_describe)[0])
    report["platform"] = type(__import__("vllm.platforms").platforms.current_platform).__name__
    print(json.dumps(report), flush=True)


def _describe(worker) -> dict:
    """The punica wrapper and the LoRA layer classes in the worker's model."""
    runner = worker.model_runner
    model = runner.get_model()
    manager = getattr(runner, "lora_manager", None)
    adapter_manager = getattr(manager, "_adapter_manager", None)
    wrappers = getattr(adapter_manager, "punica_wrapper_mapping", {}).values()
    layers = sorted({type(m).__name__ for m in model.modules() if "WithLoRA" in type(m).__name__})
    return {"punica_wrapper": ",".join(sorted({type(w).__name__ for w in wrappers})) or None,
            "lora_layers": layers}  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # collective_rpc(_describe)
    main(sys.argv[1], Path(sys.argv[2]))

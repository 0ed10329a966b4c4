"""Train the ``tiny`` embedded model on the shipped Pride and Prejudice text.

Run once by a maintainer; the result is committed under
``vllm_platform_template/embedded_model/trained/`` (tokenizer, fp16 weights and
``tiny_training.json`` with every setting below and the measured losses), and
``vllm-template tiny-model`` writes the fp32 checkpoint from it. To reproduce:

    nice -n 10 python tools/train_tiny_model.py

Deterministic as far as torch on the CPU allows: one seed for the model's
initialisation and for the batch order, ``torch.use_deterministic_algorithms``,
a fixed thread count. The same torch version, thread count and CPU ISA give the
same weights; other combinations may differ in the last bits of the sums.

Data: training paragraphs (chapters 1-58) are tokenised into one stream with
``\\n`` between paragraphs; each sample is BOS followed by ``SEQ_LEN - 1``
tokens starting at a paragraph start (as a prompt starts after BOS). Validation
is the held-out chapters (59-61), scored in consecutive windows the same way.
The checkpoint with the lowest validation loss is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vllm_platform_template.embedded_model import text_data  # noqa: E402
from vllm_platform_template.embedded_model.presets import PRESETS  # noqa: E402
from vllm_platform_template.embedded_model.tokenizer import (  # noqa: E402
    BOS_TOKEN,
    EOS_TOKEN,
    special_token_id,
    train_tokenizer,
)
from vllm_platform_template.embedded_model.trained import (  # noqa: E402
    TRAINED_DIR,
    tokenizer_path,
    training_record_path,
    weights_path,
)
from vllm_platform_template.embedded_model.writer import hf_config  # noqa: E402

SETTINGS = {
    "seed": 1813,
    "threads": 2,
    "seq_len": 256,
    "batch_size": 8,
    "steps": 300,
    "lr": 3e-3,
    "min_lr_ratio": 0.1,
    "warmup_steps": 20,
    "weight_decay": 0.1,
    "betas": [0.9, 0.95],
    "grad_clip": 1.0,
    "eval_every": 50,
    "stored_dtype": "float16",
}


def encode_paragraphs(tokenizer, paragraphs: list[str]) -> tuple[list[int], list[int]]:
    """Token stream of ``paragraphs`` joined by the separator, and paragraph start offsets."""
    stream: list[int] = []
    starts: list[int] = []
    sep = tokenizer.encode(text_data.PARAGRAPH_SEPARATOR, add_special_tokens=False).ids
    for i, paragraph in enumerate(paragraphs):
        if i:
            stream.extend(sep)
        starts.append(len(stream))
        stream.extend(tokenizer.encode(paragraph, add_special_tokens=False).ids)
    return stream, starts


def eval_loss(model, windows: torch.Tensor) -> float:
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for chunk in windows.split(16):
            logits = model(chunk).logits[:, :-1]
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1), reduction="sum"
            )
            total += loss.item()
            count += chunk[:, 1:].numel()
    model.train()
    return total / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=SETTINGS["steps"])
    parser.add_argument("--out", type=Path, default=TRAINED_DIR)
    args = parser.parse_args()
    settings = {**SETTINGS, "steps": args.steps}

    torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    torch.use_deterministic_algorithms(True)
    preset = PRESETS["tiny"]

    train_pars = text_data.training_paragraphs()
    tokenizer = train_tokenizer(train_pars, preset.vocab_size)
    bos = special_token_id(tokenizer, BOS_TOKEN)
    stream, starts = encode_paragraphs(tokenizer, train_pars)
    body = settings["seq_len"] - 1
    starts = [s for s in starts if s + body <= len(stream)]
    data = torch.tensor(stream)
    val_stream, _ = encode_paragraphs(tokenizer, text_data.held_out_paragraphs())
    val_windows = torch.tensor(
        [[bos, *val_stream[i : i + body]] for i in range(0, len(val_stream) - body + 1, body)]
    )
    print(f"train tokens {len(stream)}, val tokens {val_windows[:, 1:].numel()}", flush=True)

    config = hf_config(
        preset, bos_token_id=bos, eos_token_id=special_token_id(tokenizer, EOS_TOKEN)
    )
    model = LlamaForCausalLM(LlamaConfig(**config)).float()
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings["lr"],
        betas=tuple(settings["betas"]),
    )

    def lr_at(step: int) -> float:
        if step < settings["warmup_steps"]:
            return settings["lr"] * (step + 1) / settings["warmup_steps"]
        progress = (step - settings["warmup_steps"]) / max(
            1, settings["steps"] - settings["warmup_steps"]
        )
        ratio = settings["min_lr_ratio"]
        return settings["lr"] * (ratio + (1 - ratio) * 0.5 * (1 + math.cos(math.pi * progress)))

    gen = torch.Generator().manual_seed(settings["seed"])
    starts_t = torch.tensor(starts)
    offsets = torch.arange(body)
    bos_col = torch.full((settings["batch_size"], 1), bos)
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    history = []
    t0 = time.perf_counter()
    for step in range(settings["steps"]):
        pick = starts_t[torch.randint(len(starts_t), (settings["batch_size"],), generator=gen)]
        batch = torch.cat([bos_col, data[pick[:, None] + offsets]], dim=1)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = model(batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings["grad_clip"])
        opt.step()
        last = step + 1 == settings["steps"]
        if (step + 1) % settings["eval_every"] == 0 or last:
            val = eval_loss(model, val_windows)
            elapsed = time.perf_counter() - t0
            history.append(
                {
                    "step": step + 1,
                    "train_loss": round(loss.item(), 4),
                    "val_loss": round(val, 4),
                    "seconds": round(elapsed, 1),
                }
            )
            print(json.dumps(history[-1]), flush=True)
            if best is None or val < best[0]:
                best = (
                    val,
                    step + 1,
                    {k: v.detach().clone() for k, v in model.state_dict().items()},
                )
    train_s = time.perf_counter() - t0
    assert best is not None

    stored_dtype = getattr(torch, settings["stored_dtype"])
    stored = {k: v.to(stored_dtype).contiguous() for k, v in best[2].items()}
    model.load_state_dict({k: v.float() for k, v in stored.items()})
    val_stored = eval_loss(model, val_windows)

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(tokenizer_path(args.out)))
    save_file(stored, str(weights_path(args.out)), metadata={"format": "pt"})
    record = {
        "preset": preset.name,
        "text": text_data.TEXT_PATH.name,
        "text_sha256": hashlib.sha256(text_data.TEXT_PATH.read_bytes()).hexdigest(),
        "held_out_first_chapter": text_data.HELD_OUT_FIRST_CHAPTER,
        "settings": settings,
        "versions": {
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "tokenizers": __import__("tokenizers").__version__,
        },
        "train_tokens": len(stream),
        "val_tokens": int(val_windows[:, 1:].numel()),
        "best_step": best[1],
        "val_loss_fp32": round(best[0], 4),
        "val_perplexity_fp32": round(math.exp(best[0]), 3),
        "val_loss_stored": round(val_stored, 4),
        "val_perplexity_stored": round(math.exp(val_stored), 3),
        "train_seconds": round(train_s, 1),
        "history": history,
    }
    training_record_path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "history"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

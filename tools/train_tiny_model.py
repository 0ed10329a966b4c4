"""Train the ``tiny`` (or ``tiny-moe``) embedded model on Jane Austen's six novels.

Run once by a maintainer; the result is committed under
``vllm_platform_template_tools/embedded_model/trained/`` (tokenizer, fp16 weights and
``tiny_training.json`` with the command, the device, every setting below and
the measured losses), and ``vllm-template tiny-model`` writes the fp32
checkpoint from it. To reproduce:

    python tools/austen_from_debian.py ~/.cache/vllm-platform-template/austen
    nice -n 10 python tools/train_tiny_model.py [--device DEVICE]
    python tools/train_tiny_model.py --preset tiny-moe --tokenizer \
        vllm_platform_template_tools/embedded_model/trained/tiny_tokenizer.json

``tiny-moe`` (Mixtral architecture) trains with transformers' router load-balancing
loss beside the language-model loss; its weights are stored under the checkpoint names
vLLM's and transformers' Mixtral loaders read (``block_sparse_moe.experts.N.w1``...).

Deterministic as far as torch allows: one seed for the model's initialisation
and for the batch order, ``torch.use_deterministic_algorithms``, a fixed thread
count. The same torch version, device (thread count and CPU ISA on the CPU)
give the same weights; other combinations may differ in the last bits of the
sums. The committed weights were trained on an H100 (see the record).

Data: the training paragraphs - *Pride and Prejudice* chapters 1-58 (shipped)
and the five other novels (:data:`EXTRA_TEXTS`, not shipped, sha256-checked) -
are tokenised into one stream with ``\\n`` between paragraphs (the tokenizer is
trained on the same paragraphs unless ``--tokenizer`` names one); each sample
is BOS followed by ``SEQ_LEN - 1`` tokens starting at a paragraph start (as a
prompt starts after BOS). Validation is *Pride and Prejudice*'s held-out
chapters (59-61), scored in consecutive windows the same way. The checkpoint
with the lowest validation loss is kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vllm_platform_template_tools.embedded_model import text_data  # noqa: E402
from vllm_platform_template_tools.embedded_model.presets import PRESETS  # noqa: E402
from vllm_platform_template_tools.embedded_model.tokenizer import (  # noqa: E402
    BOS_TOKEN,
    EOS_TOKEN,
    special_token_id,
    train_tokenizer,
)
from vllm_platform_template_tools.embedded_model.trained import (  # noqa: E402
    TRAINED_DIR,
    tokenizer_path,
    training_record_path,
    weights_path,
)
from vllm_platform_template_tools.embedded_model.writer import hf_config  # noqa: E402

# Austen's five other novels, training text beside Pride and Prejudice chapters 1-58
# (the held-out chapters stay unseen). Not shipped: tools/austen_from_debian.py
# extracts them from the same Debian package as the shipped text (sha256 checked).
EXTRA_TEXTS = {
    "sense_and_sensibility.txt": "105e1651fe93bed7130078578efd31e0c557d68667ba672ddc876f735b30fe09",
    "mansfield_park.txt": "98bc90519cdf4ef663ad7de2734bb529435ef24f7abbde6bb1a50898871dafe9",
    "emma.txt": "7c67b5985c6d0de1efaeb5d342d52cb82c38083c40e2295129e30e87ee690ebe",
    "northanger_abbey.txt": "51f91bbe0517db8e65cff009b097ce0a1836124c4e0532ac19e6c0cad982abed",
    "persuasion.txt": "8061549557aebd2fd6e353d18d9197cb707029112bd52d4d8b174583a925848a",
}
# The model shape (PRESETS["tiny"] unless overridden on the command line, to try others).
SHAPE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
)
DEFAULT_EXTRA_DIR = Path.home() / ".cache" / "vllm-platform-template" / "austen"

SETTINGS = {
    "seed": 1813,
    "threads": 2,
    "seq_len": 256,
    "batch_size": 16,
    "steps": 3000,
    "lr": 3e-3,
    "min_lr_ratio": 0.1,
    "warmup_steps": 20,
    "weight_decay": 0.1,
    "betas": [0.9, 0.95],
    "grad_clip": 1.0,
    "eval_every": 50,
    "stored_dtype": "float16",
}


def platform_cpu() -> str:
    """The CPU's model name (for the training record)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "cpu"


def extra_paragraphs(directory: Path) -> list[str]:
    """The paragraphs of ``EXTRA_TEXTS`` in ``directory``, each file's sha256 checked."""
    out: list[str] = []
    for name, sha256 in EXTRA_TEXTS.items():
        path = directory / name
        if not path.is_file():
            raise SystemExit(
                f"{path} is missing: run `python tools/austen_from_debian.py {directory}` "
                "(downloads Debian's r-cran-janeaustenr) or pass --extra-text-dir"
            )
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != sha256:
            raise SystemExit(f"{path}: sha256 {digest}, expected {sha256}")
        out.extend(text_data.paragraphs(path.read_text(encoding="utf-8")))
    return out


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


def mixtral_checkpoint_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' in-memory Mixtral state (one tensor for a layer's experts) under the names of a
    Mixtral checkpoint: ``block_sparse_moe.gate`` and ``block_sparse_moe.experts.N.w1/w2/w3``
    (w1 the gate, w3 the up projection, w2 the down projection)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if ".mlp.experts.gate_up_proj" in name:
            prefix = name.replace(".mlp.experts.gate_up_proj", ".block_sparse_moe.experts.")
            gate, up = tensor.chunk(2, dim=1)
            for e in range(tensor.shape[0]):
                out[f"{prefix}{e}.w1.weight"] = gate[e].contiguous()
                out[f"{prefix}{e}.w3.weight"] = up[e].contiguous()
        elif ".mlp.experts.down_proj" in name:
            prefix = name.replace(".mlp.experts.down_proj", ".block_sparse_moe.experts.")
            for e in range(tensor.shape[0]):
                out[f"{prefix}{e}.w2.weight"] = tensor[e].contiguous()
        elif ".mlp.gate.weight" in name:
            out[name.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = tensor
        else:
            out[name] = tensor
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny", choices=("tiny", "tiny-moe"))
    parser.add_argument("--steps", type=int, default=SETTINGS["steps"])
    parser.add_argument("--out", type=Path, default=TRAINED_DIR)
    parser.add_argument(
        "--extra-text-dir",
        type=Path,
        default=DEFAULT_EXTRA_DIR,
        help="where tools/austen_from_debian.py wrote the other novels",
    )
    parser.add_argument(
        "--tokenizer", type=Path, help="use this trained tokenizer.json instead of training one"
    )
    parser.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    for name in SHAPE_KEYS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name)
    for name in ("batch_size", "warmup_steps"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name)
    parser.add_argument("--lr", type=float)
    parser.add_argument(
        "--max-seconds", type=float, help="stop after this long, keeping the best checkpoint"
    )
    args = parser.parse_args()
    overrides = {
        k: getattr(args, k)
        for k in (*SHAPE_KEYS, "batch_size", "warmup_steps", "lr")
        if getattr(args, k) is not None
    }
    settings = {**SETTINGS, "steps": args.steps, **overrides}
    device = torch.device(args.device)

    torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    # On an accelerator also set its deterministic-workspace variable (cuBLAS:
    # CUBLAS_WORKSPACE_CONFIG=:4096:8); an op without a deterministic kernel there
    # warns (in the log) instead of stopping the run.
    torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    preset = dataclasses.replace(
        PRESETS[args.preset], **{k: settings[k] for k in SHAPE_KEYS if k in settings}
    )

    train_pars = text_data.training_paragraphs() + extra_paragraphs(args.extra_text_dir)
    if args.tokenizer is not None:
        tokenizer = Tokenizer.from_file(str(args.tokenizer))
    else:
        tokenizer = train_tokenizer(train_pars, preset.vocab_size)
    bos = special_token_id(tokenizer, BOS_TOKEN)
    stream, starts = encode_paragraphs(tokenizer, train_pars)
    body = settings["seq_len"] - 1
    starts = [s for s in starts if s + body <= len(stream)]
    data = torch.tensor(stream, device=device)
    val_stream, _ = encode_paragraphs(tokenizer, text_data.held_out_paragraphs())
    val_windows = torch.tensor(
        [[bos, *val_stream[i : i + body]] for i in range(0, len(val_stream) - body + 1, body)],
        device=device,
    )
    print(f"train tokens {len(stream)}, val tokens {val_windows[:, 1:].numel()}", flush=True)

    config = hf_config(
        preset, bos_token_id=bos, eos_token_id=special_token_id(tokenizer, EOS_TOKEN)
    )
    # Plain (eager) attention: the same model, with deterministic backward kernels.
    # (transformers' typed LlamaConfig does not list the kwarg PretrainedConfig takes.)
    if preset.is_moe:
        # The router's load-balancing loss joins the language-model loss (else experts die).
        moe_config = MixtralConfig(
            **{**config, "output_router_logits": True}, attn_implementation="eager"
        )  # type: ignore[call-arg]
        model = MixtralForCausalLM(moe_config).float().to(device)
    else:
        llama_config = LlamaConfig(**config, attn_implementation="eager")  # type: ignore[call-arg]
        model = LlamaForCausalLM(llama_config).float().to(device)
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
    offsets = torch.arange(body, device=device)
    bos_col = torch.full((settings["batch_size"], 1), bos, device=device)
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    history = []
    t0 = time.perf_counter()
    for step in range(settings["steps"]):
        pick = starts_t[torch.randint(len(starts_t), (settings["batch_size"],), generator=gen)]
        pick = pick.to(device)
        batch = torch.cat([bos_col, data[pick[:, None] + offsets]], dim=1)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = model(batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings["grad_clip"])
        opt.step()
        out_of_time = args.max_seconds is not None and time.perf_counter() - t0 > args.max_seconds
        last = step + 1 == settings["steps"] or out_of_time
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
                    {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
                )
        if out_of_time:
            print(f"stopped after {step + 1} steps: --max-seconds {args.max_seconds}", flush=True)
            break
    train_s = time.perf_counter() - t0
    assert best is not None

    stored_dtype = getattr(torch, settings["stored_dtype"])
    stored = {k: v.to(stored_dtype).contiguous() for k, v in best[2].items()}
    model.load_state_dict({k: v.float().to(device) for k, v in stored.items()})
    val_stored = eval_loss(model, val_windows)
    if preset.is_moe:
        stored = mixtral_checkpoint_names(stored)

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(tokenizer_path(args.out, preset.name)))
    save_file(stored, str(weights_path(args.out, preset.name)), metadata={"format": "pt"})
    record = {
        "command": " ".join(["python", *sys.argv]),
        "preset": preset.name,
        "text": text_data.TEXT_PATH.name,
        "text_sha256": hashlib.sha256(text_data.TEXT_PATH.read_bytes()).hexdigest(),
        "extra_texts": EXTRA_TEXTS,
        "held_out_first_chapter": text_data.HELD_OUT_FIRST_CHAPTER,
        "settings": settings,
        "shape": {k: getattr(preset, k) for k in SHAPE_KEYS},
        "parameters": preset.num_parameters(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform_cpu(),
        "tokenizer_sha256": hashlib.sha256(tokenizer.to_str().encode()).hexdigest(),
        "versions": {
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "tokenizers": __import__("tokenizers").__version__,
        },
        "train_tokens": len(stream),
        "val_tokens": int(val_windows[:, 1:].numel()),
        "steps_run": history[-1]["step"],
        "best_step": best[1],
        "val_loss_fp32": round(best[0], 4),
        "val_perplexity_fp32": round(math.exp(best[0]), 3),
        "val_loss_stored": round(val_stored, 4),
        "val_perplexity_stored": round(math.exp(val_stored), 3),
        "train_seconds": round(train_s, 1),
        "history": history,
    }
    training_record_path(args.out, preset.name).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "history"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

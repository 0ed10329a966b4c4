"""``vllm-template demo``: generate text with vLLM on the template platform.

The main job of the project in one command. It needs no arguments: it writes
the embedded model if missing, starts vLLM's offline engine (``LLM``) on the
template platform, generates greedily, and reports what ran where. ``--json``
prints one JSON object (the tests and benchmarks use it); ``--stock`` runs the
same on stock vLLM with the plugin inactive, for comparison.

Decoding is greedy with vLLM's repetition penalty (``--repetition-penalty``,
default 1.2; 1 is plain greedy): a 2M-parameter model decoded plainly greedily
loops within a sentence or two, and the penalty keeps it deterministic and
comparable token for token with stock vLLM and transformers (the e2e tier
passes the same penalty to transformers' ``generate``).

It also scores a held-out passage of the tiny model's training book the way
evaluation harnesses do: one request with ``prompt_logprobs=0`` and
``max_tokens=1`` gives the log-probability of every passage token, and the
report carries their perplexity (the e2e tier compares it across platforms).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from vllm_platform_template.settings import COMPILE_STAGES, DEVICE_PACKAGES, KERNEL_ROADS

# The tiny model is trained on Pride and Prejudice (embedded_model/text/).
DEFAULT_PROMPTS = (
    "It is a truth universally acknowledged,",
    '"My dear Mr. Bennet," said his lady to him one day,',
    "Elizabeth walked on",
)
# The first backend of the registry (the CPU reference backend where there is one).
DEFAULT_DEVICE = next(iter(DEVICE_PACKAGES))
# Greedy decoding of the tiny model with this penalty repeats no 4-token sequence
# within the default prompts' 32-token continuations; plain greedy (1.0) does.
DEFAULT_REPETITION_PENALTY = 1.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default=DEFAULT_DEVICE,
        help=f"template backend: {', '.join(DEVICE_PACKAGES)} (default {DEFAULT_DEVICE})",
    )
    parser.add_argument(
        "--stock", action="store_true", help="run stock vLLM with the plugin inactive instead"
    )
    parser.add_argument("--size", default="tiny", choices=("tiny", "small"), help="embedded model")
    parser.add_argument(
        "--model-dir", type=Path, help="a model directory instead of the embedded one"
    )
    parser.add_argument("--prompt", action="append", dest="prompts", help="repeatable")
    parser.add_argument(
        "--prompt-token-ids", help="JSON list of token-id lists, instead of text prompts"
    )
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--repetition-penalty",
        type=float,
        default=DEFAULT_REPETITION_PENALTY,
        help="vLLM's repetition penalty on greedy decoding (1 = plain greedy)",
    )
    parser.add_argument(
        "--logprobs", type=int, default=0, help="report the top-K logprobs of each generated token"
    )
    parser.add_argument("--enforce-eager", action="store_true", help="no compilation, no graphs")
    parser.add_argument("--compile-stage", choices=COMPILE_STAGES, help="template compiler stage")
    parser.add_argument(
        "--kernel-road",
        choices=KERNEL_ROADS,
        help="how RMSNorm reaches the device kernels: vLLM IR providers (ir) or the "
        "CustomOp forward_oot (custom_op, the road after vLLM drops IR)",
    )
    parser.add_argument(
        "--dtype", default="checkpoint", help="'checkpoint' (default) or a vLLM dtype"
    )
    parser.add_argument("--kv-cache-mib", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument(
        "--engine-args", default="{}", help="JSON object of extra vllm.LLM keyword arguments"
    )
    parser.add_argument(
        "--no-perplexity",
        dest="perplexity",
        action="store_false",
        help="skip scoring the held-out passage (perplexity via prompt_logprobs)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def checkpoint_dtype(model_dir: Path, device: str) -> str:
    """The dtype stored in ``config.json`` (vLLM's ``dtype="auto"`` would run a
    float32 checkpoint in bf16/fp16; the demo and the parity tests want the
    checkpoint's own precision).

    On the CPU a bf16 checkpoint runs in bf16 wherever one of vLLM's kernel
    builds loaded (every build runs bf16: ``vllm_cpu_build.bf16_problem``, the
    rule the bf16 tests follow too); only without one does it fall back to
    float32, with a warning saying why.
    """
    config = json.loads((model_dir / "config.json").read_text())
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "float32")
    # [full only] the CPU reference backend
    if dtype == "bfloat16" and device == "cpu":
        from vllm_platform_template.devices.cpu import vllm_cpu_build

        problem = vllm_cpu_build.bf16_problem(vllm_cpu_build.load_cpu_kernels())
        if problem is not None:
            from vllm_platform_template.log import get_logger

            get_logger(__name__).warning("running the bf16 checkpoint in float32: %s", problem)
            return "float32"
    # [/full only]
    return dtype


def build_engine_kwargs(args: argparse.Namespace, model_dir: Path) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": str(model_dir),
        "dtype": (
            checkpoint_dtype(model_dir, args.device) if args.dtype == "checkpoint" else args.dtype
        ),
        "max_model_len": args.max_model_len,
        "kv_cache_memory_bytes": args.kv_cache_mib << 20,
        "enforce_eager": args.enforce_eager,
        "seed": 0,
    }
    options = {"compile_stage": args.compile_stage, "kernel_road": args.kernel_road}
    options = {k: v for k, v in options.items() if v is not None}
    if options:
        kwargs["additional_config"] = {"template": options}
    extra = json.loads(args.engine_args)
    if not isinstance(extra, dict):
        raise SystemExit("--engine-args must be a JSON object")
    for key, value in extra.items():
        if key == "additional_config" and isinstance(value, dict):
            merged = dict(kwargs.get("additional_config", {}))
            for k, v in value.items():
                merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) else v
            kwargs[key] = merged
        else:
            kwargs[key] = value
    return kwargs


def held_out_perplexity(llm: Any) -> dict[str, Any]:
    """Perplexity of the held-out passage through vLLM's ``prompt_logprobs``.

    ``prompt_logprobs=0`` returns, for every prompt position after the first,
    the log-probability the model gave the actual token (plus no alternatives).
    """
    from vllm import SamplingParams

    from vllm_platform_template.embedded_model.text_data import PASSAGE_CHAPTER, held_out_passage

    params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0)
    (output,) = llm.generate([held_out_passage()], params, use_tqdm=False)
    token_ids = list(output.prompt_token_ids or [])
    entries = output.prompt_logprobs or []
    logprobs = [entry[tok].logprob for tok, entry in zip(token_ids[1:], entries[1:], strict=True)]
    nll = -sum(logprobs) / len(logprobs)
    return {
        "passage": f"Pride and Prejudice, chapter {PASSAGE_CHAPTER} (held out from training)",
        "prompt_token_ids": token_ids,
        "token_logprobs": [round(lp, 6) for lp in logprobs],
        "nll_per_token": nll,
        "perplexity": math.exp(nll),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Generate and return the report (the JSON object of ``--json``)."""
    from vllm_platform_template.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template.embedded_model import ensure_model

    select_device(None if args.stock else args.device)
    logs_to_stderr()
    model_dir = args.model_dir or ensure_model(args.size)

    from vllm import LLM, SamplingParams

    from vllm_platform_template.reporting import engine_report

    engine_kwargs = build_engine_kwargs(args, model_dir)
    start = time.perf_counter()
    llm = LLM(**engine_kwargs)
    init_s = time.perf_counter() - start

    sampling = {"temperature": 0.0, "repetition_penalty": args.repetition_penalty}
    params = SamplingParams(
        **sampling,
        max_tokens=args.max_tokens,
        ignore_eos=True,
        logprobs=args.logprobs or None,
    )
    if args.prompt_token_ids:
        prompts: list[Any] = [
            {"prompt_token_ids": ids} for ids in json.loads(args.prompt_token_ids)
        ]
    else:
        prompts = list(args.prompts or DEFAULT_PROMPTS)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=not args.json)
    generate_s = time.perf_counter() - start

    tokens = [list(out.outputs[0].token_ids) for out in outputs]
    perplexity = held_out_perplexity(llm) if args.perplexity else None
    report = engine_report(llm)
    num_out = sum(len(t) for t in tokens)
    return {
        **report,
        "stock": bool(args.stock),
        "model": str(model_dir),
        "dtype": engine_kwargs["dtype"],
        "sampling": sampling,
        "prompts": [p if isinstance(p, str) else p["prompt_token_ids"] for p in prompts],
        "prompt_token_ids": [list(out.prompt_token_ids or []) for out in outputs],
        "text": [out.outputs[0].text for out in outputs],
        "tokens": tokens,
        "logprobs": [
            [{tid: lp.logprob for tid, lp in step.items()} for step in out.outputs[0].logprobs]
            if out.outputs[0].logprobs
            else None
            for out in outputs
        ],
        "held_out": perplexity,
        "timings": {
            "init_s": round(init_s, 3),
            "generate_s": round(generate_s, 4),
            "output_tokens_per_s": round(num_out / generate_s, 2) if generate_s > 0 else None,
        },
    }


def print_human(report: dict[str, Any]) -> None:
    for prompt, text in zip(report["prompts"], report["text"], strict=False):
        print(f"Prompt: {prompt!r}\nOutput: {text!r}\n")
    print("-- report " + "-" * 50)
    rows = [
        ("platform", report["platform"]),
        ("device", report["device"]),
        ("compilation", f"{report['compilation_mode']} (backend {report['compile_backend']})"),
        ("cudagraph mode", report["cudagraph_mode"]),
        ("attention", ", ".join(report["attention_backends"])),
        ("decoding", f"greedy, repetition penalty {report['sampling']['repetition_penalty']}"),
    ]
    for op, entry in report["ir_ops"].items():
        rows.append((f"ir.{op}", f"{entry.get('selected')}  (priority {entry['priority']})"))
    if report.get("compile", {}).get("stage"):
        c = report["compile"]
        loaded = c["cache"]["aot_artifacts_loaded"]
        done = (
            f"loaded from the compile cache ({loaded} artifact)"
            if loaded
            else (f"{c['pieces']} pieces compiled in {sum(c['seconds'].values()):.1f} s")
        )
        rows.append(("compile stage", f"{c['stage']}: {done}"))
    if report.get("graphs", {}).get("captures"):
        g = report["graphs"]
        captured = ",".join(g["captures"])
        rows.append(
            (
                "graphs",
                f"{g['backend']}: sizes {captured} captured, {sum(g['replays'].values())} replays",
            )
        )
    if report.get("held_out"):
        h = report["held_out"]
        n = len(h["token_logprobs"])
        rows.append(
            ("perplexity", f"{h['perplexity']:.2f} on {n} tokens of {h['passage']}, unpenalized")
        )
    t = report["timings"]
    rows.append(("init", f"{t['init_s']:.1f} s"))
    rows.append(
        ("generate", f"{t['generate_s']:.3f} s, {t['output_tokens_per_s']} output tokens/s")
    )
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def main(args: argparse.Namespace) -> int:
    report = run(args)
    if args.json:
        print(json.dumps(report))
    else:
        print_human(report)
    return 0

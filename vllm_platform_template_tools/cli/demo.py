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

The log (stderr) carries vLLM's INFO lines and only the warnings the e2e tier's
demo-log test allows, each with its reason; ``--quiet`` leaves only
errors, so stdout's text and report are all there is. The engine is shut down
before the command returns, so no engine process is left for vLLM's exit-time
clean-up to kill.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import time
from pathlib import Path
from typing import Any

from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.settings import COMPILE_STAGES, KERNEL_ROADS

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
    parser.add_argument(
        "--size",
        default="tiny",
        choices=("tiny", "tiny-draft", "tiny-moe", "small"),
        help="embedded model (tiny-moe: the mixture-of-experts one; tiny-draft: tiny's first "
        "layer, the draft model for speculative decoding)",
    )
    parser.add_argument(
        "--quantized",
        action="store_true",
        help="the embedded model's W8A8 INT8 checkpoint (compressed-tensors; tiny, tiny-moe)",
    )
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
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no log: only errors on stderr (VLLM_LOGGING_LEVEL=ERROR, torch's "
        "TORCH_CPP_LOG_LEVEL=ERROR, no progress bars)",
    )


def checkpoint_dtype(model_dir: Path, device: str) -> str:
    """The dtype stored in ``config.json`` (vLLM's ``dtype="auto"`` would run a
    float32 checkpoint in bf16/fp16; the demo and the parity tests want the
    checkpoint's own precision).

    Where the device cannot run that dtype well here, its folder says what runs
    instead (``TemplateDevice.checkpoint_dtype``; the CPU: float32 for bf16 without
    one of vLLM's kernel builds), with a warning saying why.
    """
    config = json.loads((model_dir / "config.json").read_text())
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "float32")
    from vllm_platform_template.device import device_for

    template_device = device_for(device)
    if template_device is None:
        return dtype
    runs, problem = template_device.checkpoint_dtype(dtype)
    if problem is not None:
        from vllm_platform_template.log import get_logger

        get_logger(__name__).warning("running the %s checkpoint in %s: %s", dtype, runs, problem)
    return runs


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
    if getattr(args, "quiet", False):
        kwargs["use_tqdm_on_load"] = False
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

    from vllm_platform_template_tools.embedded_model.text_data import (
        PASSAGE_CHAPTER,
        held_out_passage,
    )

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
    from vllm_platform_template_tools.cli.environment import (
        logs_to_stderr,
        quiet_logs,
        select_device,
    )
    from vllm_platform_template_tools.embedded_model import ensure_model

    select_device(None if args.stock else args.device)
    logs_to_stderr()
    if getattr(args, "quiet", False):
        quiet_logs()
    model_dir = args.model_dir or ensure_model(args.size, quantized=args.quantized)

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
    outputs = llm.generate(
        prompts, params, use_tqdm=not (args.json or getattr(args, "quiet", False))
    )
    generate_s = time.perf_counter() - start

    tokens = [list(out.outputs[0].token_ids) for out in outputs]
    perplexity = held_out_perplexity(llm) if args.perplexity else None
    report = engine_report(llm)
    shutdown_engine(llm)
    num_out = sum(len(t) for t in tokens)
    startup = report.get("startup_s") or {}
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
        "graph_mode_reason": graph_mode_reason(report, engine_kwargs, stock=bool(args.stock)),
        "timings": {
            "init_s": round(init_s, 3),
            **init_split(init_s, startup),
            "generate_s": round(generate_s, 4),
            "output_tokens_per_s": round(num_out / generate_s, 2) if generate_s > 0 else None,
        },
    }


# How long ``shutdown_engine`` lets the engine process stop before vLLM force-kills it.
# vLLM's default is a best-effort 5 s; on a loaded 2-core host the engine's
# exit can take longer, and a killed engine leaves its shared-memory queues to
# the resource tracker, whose leak warnings then reach the user's stderr.
ENGINE_STOP_TIMEOUT_S = 60.0


def shutdown_engine(llm: Any, timeout_s: float = ENGINE_STOP_TIMEOUT_S) -> None:
    """Stop the engine processes now and wait up to ``timeout_s`` for them to exit.

    Left to interpreter exit, vLLM's finalizer terminates the engine process and
    its liveness monitor may first report it "exited unexpectedly". vLLM's own
    callers stop an offline engine the same way (``llm_engine.engine_core.shutdown``,
    as its tensorizer loader does). Nothing is in flight when the demo stops, so
    waiting costs nothing: the engine and its worker end within about a second
    on a quiet host (``patches.py``, ``end_spawned_processes_like_forked_ones``);
    ``timeout_s`` (vLLM's ``shutdown(timeout=...)``) is how long a loaded host
    gets before vLLM force-kills the engine, whose queues' shared memory would
    then be reclaimed by the resource tracker with a warning on stderr. An engine
    process that was killed all the same is reported as an error (shown with
    ``--quiet`` too), so that those warnings come with their cause.
    """
    client = llm.llm_engine.engine_core
    client.shutdown(timeout=timeout_s)
    killed = [
        f"{proc.name} (pid {proc.pid})"
        for proc in engine_processes(client)
        if proc.exitcode == -signal.SIGKILL
    ]
    if killed:
        from vllm_platform_template.log import get_logger

        get_logger(__name__).error(
            "the engine did not stop within %.0f s of SIGTERM and was killed: %s; the "
            "resource tracker reclaims its shared memory (its 'leaked' warnings below). "
            "Nothing was lost (the run had finished); if this repeats, run with "
            "VLLM_LOGGING_LEVEL=DEBUG to see which shutdown step it was in",
            timeout_s,
            ", ".join(killed),
        )


def engine_processes(client: Any) -> list[Any]:
    """The engine-core processes of vLLM's multiprocess client (none in-process)."""
    resources = getattr(client, "resources", None)
    manager = getattr(resources, "engine_manager", None)
    return list(getattr(manager, "processes", None) or [])


def init_split(init_s: float, startup: dict[str, float]) -> dict[str, float]:
    """``init_s`` (the ``vllm.LLM(...)`` call) split into what it counts.

    ``startup`` is the worker's ``startup_s`` (``worker_reports.py``): model load,
    engine init (profile run with compilation, KV cache, graph capture, warm-up:
    vLLM's "init engine (profile, create kv cache, warmup model) took" line) and
    compile (vLLM's "torch.compile took ... in total"). Engine start is the rest:
    starting the engine and worker processes, imports, config, tokenizer.
    """
    if not startup:
        return {}
    return {
        "engine_start_s": round(init_s - startup["model_load"] - startup["engine_init"], 3),
        "model_load_s": startup["model_load"],
        "compile_s": startup["compile"],
        "warm_up_s": round(startup["engine_init"] - startup["compile"], 3),
        "engine_init_s": startup["engine_init"],
    }


GRAPHS_ON = """--engine-args '{"compilation_config": {"cudagraph_mode": "PIECEWISE"}}'"""


def graph_mode_reason(report: dict[str, Any], engine_kwargs: dict[str, Any], stock: bool) -> str:
    """Why the run used the graph mode it did."""
    from vllm_platform_template.device import device_for

    mode = report.get("cudagraph_mode")
    if stock:
        return "stock vLLM's CPU platform captures no graphs" if mode == "NONE" else "stock vLLM"
    if engine_kwargs.get("enforce_eager"):
        return "--enforce-eager: no compilation, no graphs"
    requested = (engine_kwargs.get("compilation_config") or {}).get("cudagraph_mode")
    if requested is not None:
        return "requested (compilation_config.cudagraph_mode)"
    device = device_for(str(report.get("device")))
    if device is None or device.default_graph_mode is None:
        return "vLLM's default"
    if device.default_graph_mode == "NONE" and device.graph_mode_note:
        return f"the {device.name.upper()} default ({device.graph_mode_note}); on: {GRAPHS_ON}"
    return f"the {device.name.upper()} default"


def print_human(report: dict[str, Any]) -> None:
    for prompt, text in zip(report["prompts"], report["text"], strict=False):
        print(f"Prompt: {prompt!r}\nOutput: {text!r}\n")
    print("-- report " + "-" * 50)
    rows = [
        ("platform", report["platform"]),
        ("device", report["device"]),
        ("compilation", f"{report['compilation_mode']} (backend {report['compile_backend']})"),
        ("graphs", graphs_row(report)),
        ("attention", ", ".join(report["attention_backends"])),
        ("decoding", f"greedy, repetition penalty {report['sampling']['repetition_penalty']}"),
    ]
    for op, entry in report["ir_ops"].items():
        callers = entry.get("called_by")
        called = (
            f"called by {', '.join(callers)}" if callers else "not called by this model's layers"
        )
        rows.append(
            (f"ir.{op}", f"{entry.get('selected')}  (priority {entry['priority']}; {called})")
        )
    if report.get("compile", {}).get("stage"):
        c = report["compile"]
        loaded = c["cache"]["aot_artifacts_loaded"]
        done = (
            f"loaded from the compile cache ({loaded} artifact)"
            if loaded
            else (f"{c['pieces']} pieces compiled in {sum(c['seconds'].values()):.1f} s")
        )
        rows.append(("compile stage", f"{c['stage']}: {done}"))
    full = report.get("graphs", {}).get("full", {})
    if full.get("captures"):
        rows.append(
            (
                "full graphs",
                f"sizes {','.join(full['captures'])} captured, "
                f"{sum(full['replays'].values())} steps replayed whole",
            )
        )
    if report.get("held_out"):
        h = report["held_out"]
        n = len(h["token_logprobs"])
        rows.append(
            ("perplexity", f"{h['perplexity']:.2f} on {n} tokens of {h['passage']}, unpenalized")
        )
    warnings_row = log_warnings_row(report)
    if warnings_row:
        rows.append(("log warnings", warnings_row))
    t = report["timings"]
    split = "engine_start_s" in t
    rows.append(("init", f"{t['init_s']:.1f} s (vllm.LLM(...)){', of which:' if split else ''}"))
    if split:
        rows += [
            ("  engine start", f"{t['engine_start_s']:.1f} s  processes, imports, config"),
            ("  model load", f"{t['model_load_s']:.2f} s  the worker's load_model"),
            ("  compile", f'{t["compile_s"]:.2f} s  vLLM: "torch.compile took ... in total"'),
            (
                "  warm-up",
                f"{t['warm_up_s']:.2f} s  profile run, KV cache, warm-up; with compile "
                f'{t["engine_init_s"]:.2f} s, vLLM\'s "init engine ... took"',
            ),
        ]
    rows.append(
        ("generate", f"{t['generate_s']:.3f} s, {t['output_tokens_per_s']} output tokens/s")
    )
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def log_warnings_row(report: dict[str, Any]) -> str:
    """What the warnings left in the demo's log (the e2e tier allows them) are about:
    the device folder says (``TemplateDevice.explain_log_warnings``)."""
    from vllm_platform_template.device import device_for

    device = device_for(str(report.get("device")))
    if device is None or device.explain_log_warnings is None:
        return ""
    return device.explain_log_warnings(report)


def graphs_row(report: dict[str, Any]) -> str:
    """The graph mode that ran, why, and what was captured and replayed."""
    row = f"{report['cudagraph_mode']}, {report['graph_mode_reason']}"
    g = report.get("graphs") or {}
    if g.get("captures"):
        captured = ",".join(g["captures"])
        row += f"; {g['backend']}: sizes {captured} captured, {sum(g['replays'].values())} replays"
    return row


# Run as the process's command, the process ends once the report is printed and the
# exit handlers ran, without the interpreter's finalization (cli/main.py, process_exit):
# its teardown of torch and vLLM took 3 s on an idle 2-core host, 9 s on a busy one.
ENDS_ITS_PROCESS = True


def main(args: argparse.Namespace) -> int:
    report = run(args)
    if args.json:
        print(json.dumps(report))
    else:
        print_human(report)
    return 0

"""One engine, kept alive in its own process and measured on request by the benchmarks.

    python benchmarks/_engine_probe.py '{"variant": "template-graph", "size": "small"}'
    python benchmarks/_engine_probe.py '{"variant": "gpu-template", "shape": "1.1b"}'

``size`` names an embedded model (its weights); ``shape`` a benchmark shape of
``bench_shapes.py`` (config and tokenizer only, vLLM's dummy weights made on the
device). Starts the engine and writes one JSON line to stdout: ``init_s``, the
process id, the engine arguments (``kwargs``), the ``VLLM_*``/torch/Triton/CUDA
environment the engine was asked to start with (``env``) and what building it
changed there (``env_changed``), and, when the spec names a
``worker_extension_cls`` (``_bench_worker.py``), the configuration the worker
resolved (``resolved``). Then it reads one JSON command per line from stdin and
answers each with one JSON line:

- ``{"op": "decode", "batch": B, "tokens": N, "seed": S}``: one request batch;
  time to first token and decode tokens/s (the first call per batch shape
  warms that shape and is not reported);
- ``{"op": "prefill", "length": L, "seed": S}``: prefill tokens/s of one prompt;
- ``{"op": "warm", "batches": [B...], "prompt": P, "short": S, "long": L, "prefill": N}``:
  every shape a unit runs, once, unmeasured (first calls compile, capture, allocate);
- ``{"op": "unit", "batches": [B...], "prompt": P, "short": S, "long": L, "prefill": N,
  "long_first": bool, "repeats": R, "seed": S}``: one unit of ``gpu_e2e.py``'s quads:
  per batch R short and R long generations after a P-token prompt (alternating, long
  first when asked), then R N-token prefills; the fastest of each kind (the host's
  jitter only adds time) and the unit's wall-clock start and end;
- ``{"op": "gpu_step", "batch": B, "prompt": P, "short": S, "long": L, "warm": bool}``:
  what the device does per decode step, from the worker (``_bench_worker.py``): after
  one unmeasured long generation (unless ``warm`` is false: the shape already ran), the
  median span of the long generation's decode steps on the GPU's clock (events, no
  profiler), then,
  in a second pass under the torch profiler, the kernel time of a long and a short
  generation, whose difference over ``L - S`` is the kernel time per step;
- ``{"op": "decode_profile", "batch": B, "prompt": P, "short": S, "long": L}``: after one
  unmeasured long generation, a long and a short generation each under the torch
  profiler; each kernel's time and launches per decode step (its long figure less its
  short one over ``L - S``, by the kernel's full name), and the totals per step;
- ``{"op": "quit"}``.

Keeping engines alive lets the benchmark interleave variants request by
request, so slow drifts of a shared machine hit every variant alike. vLLM's
logs go to stderr; stdout carries only the JSON answers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    # stock vLLM CPU platform, plugin inactive, its default compile path
    "stock": {"device": None},
    "template-graph": {"device": "cpu", "template": {"compile_stage": "graph"}},
    "template-fusion_only": {"device": "cpu", "template": {"compile_stage": "fusion_only"}},
    "template-fused-model": {"device": "cpu", "template": {"model_impl": "fused"}},
    # the graph stage compiled as one graph: no split at attention (nothing to capture on CPU)
    "template-graph-unsplit": {"device": "cpu", "compilation": {"splitting_ops": []}},
    "stock-eager": {"device": None, "enforce_eager": True},
    "template-eager": {"device": "cpu", "enforce_eager": True},
    # On a CUDA GPU (benchmarks/gpu_e2e.py). Stock: vLLM's CudaPlatform with its compiled
    # files staged (../shared/reference/gpu-measurements-2026-11.md): its default attention
    # backend (FlashAttention 3 on Hopper), and its Triton backend.
    "gpu-stock": {
        "device": None,
        "env": {"VLLM_PLUGINS": "none", "VLLM_USE_FLASHINFER_SAMPLER": "0"},
    },
    "gpu-stock-triton": {
        "device": None,
        "env": {"VLLM_PLUGINS": "none", "VLLM_USE_FLASHINFER_SAMPLER": "0"},
        "engine": {"attention_backend": "TRITON_ATTN"},
    },
    # stock with the start method the template platform sets (VLLM_WORKER_MULTIPROC_METHOD):
    # what that one environment difference costs or gains on its own
    "gpu-stock-spawn": {
        "device": None,
        "env": {
            "VLLM_PLUGINS": "none",
            "VLLM_USE_FLASHINFER_SAMPLER": "0",
            "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        },
    },
    "gpu-template": {"device": "cuda"},  # the platform's default: FULL_AND_PIECEWISE
    "gpu-template-fused": {"device": "cuda", "template": {"model_impl": "fused"}},
}


def _prompt_ids(count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    return [
        [(7 + seed + 31 * i + 17 * j) % (vocab - 10) + 10 for j in range(length)]
        for i in range(count)
    ]


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # anything else printed must not corrupt the answers
    spec = json.loads(sys.argv[1])
    variant = VARIANTS[spec["variant"]]
    if spec.get("cpus"):  # the engine's processes (children inherit it) on these cores only
        os.sched_setaffinity(0, spec["cpus"])
    from vllm_platform_template_tools.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template_tools.embedded_model import PRESETS, ensure_model

    select_device(variant["device"])
    os.environ.update(variant.get("env", {}))
    logs_to_stderr()
    kwargs: dict[str, Any] = {}
    if "shape" in spec:
        from bench_shapes import SHAPES, shape_model_dir

        preset = SHAPES[spec["shape"]]
        model_dir = shape_model_dir(spec["shape"])
        kwargs["load_format"] = "dummy"
        kwargs["skip_tokenizer_init"] = True  # token-id prompts; no tokenizer in the folder
    else:
        model_dir = ensure_model(spec["size"])
        preset = PRESETS[spec["size"]]
    from vllm import LLM, SamplingParams

    from vllm_platform_template_tools.cli.demo import checkpoint_dtype

    kwargs |= {
        "model": str(model_dir),
        "dtype": spec.get("dtype") or checkpoint_dtype(model_dir, variant["device"] or "cpu"),
        "max_model_len": spec.get("max_model_len", preset.max_position_embeddings),
        "kv_cache_memory_bytes": spec.get("kv_cache_mib", 1024) << 20,
        "enable_prefix_caching": False,
        "seed": 0,
        "enforce_eager": variant.get("enforce_eager", False),
        **variant.get("engine", {}),
    }
    for key in (
        "max_num_seqs",
        "gpu_memory_utilization",
        "max_num_batched_tokens",
        "worker_extension_cls",
    ):
        if key in spec:
            kwargs[key] = spec[key]
    if "compilation" in variant:
        kwargs["compilation_config"] = variant["compilation"]
    if "template" in variant:
        kwargs["additional_config"] = {"template": variant["template"]}
    env = {k: v for k, v in sorted(os.environ.items()) if _recorded_env(k)}
    start = time.perf_counter()
    llm = LLM(**kwargs)
    init_s = time.perf_counter() - start
    vocab = preset.vocab_size

    def answer(payload: dict[str, Any]) -> None:
        answers.write(json.dumps(payload) + "\n")
        answers.flush()

    def timed(prompts: list[list[int]], max_tokens: int) -> float:
        params = SamplingParams(
            temperature=0.0,
            max_tokens=max_tokens,
            ignore_eos=True,
            detokenize="shape" not in spec,
        )
        begin = time.perf_counter()
        llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return time.perf_counter() - begin

    init: dict[str, Any] = {
        "variant": spec["variant"],
        "init_s": round(init_s, 2),
        "pid": os.getpid(),
        "kwargs": kwargs,
        "env": env,  # as the engine was asked for; what building it changed, beside:
        "env_changed": {
            k: os.environ.get(k)
            for k in sorted(set(env) | set(os.environ))
            if _recorded_env(k) and env.get(k) != os.environ.get(k)
        },
    }
    if "worker_extension_cls" in kwargs:
        try:  # a fact missing from the report must not cost the engine its run
            init["resolved"] = llm.collective_rpc("bench_describe")[0]
        except Exception as exc:
            init["resolved"] = {"error": f"{type(exc).__name__}: {exc}"}
    answer(init)
    warmed: set[tuple[str, int]] = set()
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "quit":
            break
        seed = command.get("seed", 0)
        if op == "decode":
            batch, tokens = command["batch"], command["tokens"]
            if ("decode", batch) not in warmed:
                # kernel primitives and allocator caches are per shape
                timed(_prompt_ids(batch, 8, vocab, 99), 8)
                warmed.add(("decode", batch))
            prompts = _prompt_ids(batch, 8, vocab, seed)
            ttft = timed(prompts, 1)
            total = timed(prompts, tokens + 1)
            answer({"ttft_ms": 1000 * ttft, "decode_tok_s": batch * tokens / (total - ttft)})
        elif op == "prefill":
            length = command["length"]
            if ("prefill", length) not in warmed:
                timed(_prompt_ids(1, length, vocab, 3), 1)
                warmed.add(("prefill", length))
            # one 2048-token prefill takes ~15 ms: the fastest of a few
            prompts = _prompt_ids(1, length, vocab, seed)
            best = min(timed(prompts, 1) for _ in range(3))
            answer({"prefill_tok_s": length / best})
        elif op == "warm":
            for batch in command["batches"]:
                timed(_prompt_ids(batch, command["prompt"], vocab, 99), command["long"])
            timed(_prompt_ids(1, command["prefill"], vocab, 99), 1)
            answer({"warmed": command["batches"]})
        elif op == "unit":
            answer(_unit(command, vocab, timed))
        elif op == "gpu_step":
            answer(_gpu_step(llm, command, vocab, timed))
        elif op == "prefill_profile":
            answer(_prefill_profile(llm, command, vocab, timed))
        elif op == "decode_profile":
            answer(_decode_profile(llm, command, vocab, timed))
        else:
            answer({"error": f"unknown op {op!r}"})


def _recorded_env(name: str) -> bool:
    """Variables that change what an engine runs (its own cache folder is not one)."""
    if name in ("VLLM_CACHE_ROOT", "VLLM_LOGGING_STREAM"):
        return False
    return name.startswith(("VLLM_", "TORCH", "TRITON_", "CUDA_", "PYTORCH_")) or name in (
        "PYTHONPATH",
    )


def _unit(command: dict[str, Any], vocab: int, timed: Any) -> dict[str, Any]:
    """One unit of a quad (see the module docstring): host seconds of each generation."""
    prompt, short, long = command["prompt"], command["short"], command["long"]
    repeats = command.get("repeats", 1)
    begin = time.time()
    out: dict[str, Any] = {}
    for batch in command["batches"]:
        prompts = _prompt_ids(batch, prompt, vocab, command["seed"])
        shorts, longs = [], []
        for i in range(repeats):
            if command["long_first"] == (i % 2 == 0):
                longs.append(timed(prompts, long))
                shorts.append(timed(prompts, short))
            else:
                shorts.append(timed(prompts, short))
                longs.append(timed(prompts, long))
        # the host's jitter only adds time: the fastest of each kind
        out[f"b{batch}"] = {"short_s": min(shorts), "long_s": min(longs)}
    length = command["prefill"]
    prefill = _prompt_ids(1, length, vocab, command["seed"])
    out["prefill_s"] = min(timed(prefill, 1) for _ in range(repeats))
    return {"begin": begin, "end": time.time(), **out}


def _prefill_profile(llm: Any, command: dict[str, Any], vocab: int, timed: Any) -> dict[str, Any]:
    """One ``length``-token prefill (one output token) under the torch profiler, warmed
    twice first: its wall time and its kernels (``_bench_worker.top_kernels``)."""
    prompts = _prompt_ids(1, command["length"], vocab, 4)
    for _ in range(2):
        timed(prompts, 1)
    llm.collective_rpc("bench_record_start", kwargs={"profile": True})
    wall_s = timed(prompts, 1)
    profile = llm.collective_rpc("bench_record_stop")[0]
    keys = ("gpu_ms", "launches", "top_kernels", "categories")
    return {"wall_ms": 1000 * wall_s, **{k: profile[k] for k in keys if k in profile}}


def _decode_profile(llm: Any, command: dict[str, Any], vocab: int, timed: Any) -> dict[str, Any]:
    """Each kernel's device time and launches per decode step (see the module docstring)."""
    batch, short, long = command["batch"], command["short"], command["long"]
    prompts = _prompt_ids(batch, command["prompt"], vocab, 6)
    timed(prompts, long)  # warm this shape
    runs = {}
    for name, tokens in (("long", long), ("short", short)):
        llm.collective_rpc("bench_record_start", kwargs={"profile": True, "every_kernel": True})
        timed(prompts, tokens)
        runs[name] = llm.collective_rpc("bench_record_stop")[0]["kernels"]
    steps = long - short
    per_step = {}
    for kernel in set(runs["long"]) | set(runs["short"]):
        a = runs["long"].get(kernel, {"ms": 0.0, "count": 0})
        b = runs["short"].get(kernel, {"ms": 0.0, "count": 0})
        per_step[kernel] = {
            "ms": (a["ms"] - b["ms"]) / steps,
            "launches": (a["count"] - b["count"]) / steps,
        }
    return {
        "batch": batch,
        "kernel_ms_per_step": sum(k["ms"] for k in per_step.values()),
        "launches_per_step": sum(k["launches"] for k in per_step.values()),
        "kernels": per_step,
    }


def _gpu_step(llm: Any, command: dict[str, Any], vocab: int, timed: Any) -> dict[str, Any]:
    """Device-side figures of one batch's decode step (see the module docstring)."""
    import statistics

    batch, short, long = command["batch"], command["short"], command["long"]
    prompts = _prompt_ids(batch, command["prompt"], vocab, 5)
    if command.get("warm", True):
        timed(prompts, long)  # warm this shape
    llm.collective_rpc("bench_record_start", kwargs={"events": True})
    timed(prompts, long)
    steps = llm.collective_rpc("bench_record_stop")[0]["steps"]
    spans = [s["device_span_ms"] for s in steps if s["tokens"] == batch and "device_span_ms" in s]
    kernels = {}
    for name, tokens in (("long", long), ("short", short)):
        llm.collective_rpc("bench_record_start", kwargs={"profile": True})
        timed(prompts, tokens)
        kernels[name] = llm.collective_rpc("bench_record_stop")[0]
    return {
        "batch": batch,
        "decode_steps": len(spans),
        "span_ms_per_step": statistics.median(spans) if spans else None,
        "kernel_ms_per_step": (kernels["long"]["gpu_ms"] - kernels["short"]["gpu_ms"])
        / (long - short),
        "launches_per_step": (kernels["long"]["launches"] - kernels["short"]["launches"])
        / (long - short),
        "top_kernels_long": kernels["long"]["top_kernels"],
    }


if __name__ == "__main__":
    main()

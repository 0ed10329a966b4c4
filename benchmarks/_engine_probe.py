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
- ``{"op": "step", "batch": B, "prompt": P, "short": S, "long": L, "seed": S}``:
  decode step time in ms, ``(t(L tokens) - t(S tokens)) / (L - S)`` after a
  P-token prompt, and the time to first token;
- ``{"op": "prefill", "length": L, "seed": S}``: prefill tokens/s of one prompt;
- ``{"op": "prefill_diag", "length": L, "profile": true}``: one prefill with the
  worker recording each engine step (tokens, requests, host seconds) and, with
  ``profile``, torch-profiler kernel times (needs the worker extension);
- ``{"op": "profile", "batch": B, "prompt": P, "steps": N}``: torch profiler over N
  decode steps (the engine must run in this process: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``);
  per-step wall time, GPU kernel time and launches, the top kernels;
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
        elif op == "step":
            batch, prompt = command["batch"], command.get("prompt", 128)
            short, long = command.get("short", 16), command.get("long", 208)
            prompts = _prompt_ids(batch, prompt, vocab, seed)
            if ("step", batch) not in warmed:
                timed(_prompt_ids(batch, prompt, vocab, 99), short)
                warmed.add(("step", batch))
            ttft = timed(prompts, 1)
            # The host's jitter only ever adds time (batch 1 is host-bound): the fastest
            # of several long runs minus the fastest of as many short ones. (The best
            # difference of pairs, as before, also rewarded a short run that jitter slowed.)
            longs, shorts = [], []
            for _ in range(STEP_REPEATS):
                longs.append(timed(prompts, long))
                shorts.append(timed(prompts, short))
            step_s = (min(longs) - min(shorts)) / (long - short)
            answer({"ttft_ms": 1000 * ttft, "step_ms": 1000 * step_s})
        elif op == "profile":
            answer(_profile(llm, command, vocab, timed))
        elif op == "prefill_diag":
            # after the measured rounds: the engine steps and kernels of one prefill
            length = command["length"]
            try:
                llm.collective_rpc("bench_record_start", args=(command.get("profile", True),))
                seconds = timed(_prompt_ids(1, length, vocab, seed), 1)
                record = llm.collective_rpc("bench_record_stop")[0]
                answer({"prefill_tok_s": length / seconds, **record})
            except Exception as exc:
                answer({"error": f"{type(exc).__name__}: {exc}"})
        elif op == "prefill":
            length = command["length"]
            if ("prefill", length) not in warmed:
                timed(_prompt_ids(1, length, vocab, 3), 1)
                warmed.add(("prefill", length))
            # one 2048-token prefill takes ~15 ms: the fastest of a few, as for steps
            prompts = _prompt_ids(1, length, vocab, seed)
            best = min(timed(prompts, 1) for _ in range(PREFILL_REPEATS))
            answer({"prefill_tok_s": length / best})
        else:
            answer({"error": f"unknown op {op!r}"})


STEP_REPEATS = 5  # long and short generations per step figure; the fastest of each counts
PREFILL_REPEATS = 3  # prefills per prefill figure; the fastest counts


def _recorded_env(name: str) -> bool:
    """Variables that change what an engine runs (its own cache folder is not one)."""
    if name in ("VLLM_CACHE_ROOT", "VLLM_LOGGING_STREAM"):
        return False
    return name.startswith(("VLLM_", "TORCH", "TRITON_", "CUDA_", "PYTORCH_")) or name in (
        "PYTHONPATH",
    )


def _profile(llm: Any, command: dict[str, Any], vocab: int, timed: Any) -> dict[str, Any]:
    """torch profiler over ``steps`` decode steps of a batch (the engine in this process)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    batch, steps = command["batch"], command.get("steps", 16)
    prompts = _prompt_ids(batch, command.get("prompt", 128), vocab, 7)
    timed(prompts, steps + 1)  # warm this shape
    prefill_s = timed(prompts, 1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        total_s = timed(prompts, steps + 1)
    torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    gpu_us = sum(e.self_device_time_total for e in kernels)
    launches = sum(e.count for e in kernels)
    top = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:10]
    return {
        "batch": batch,
        "steps": steps,
        "step_ms": 1000 * (total_s - prefill_s) / steps,
        # kernel time of the whole run (prefill + steps), per decode step
        "gpu_ms_per_step": gpu_us / 1000 / (steps + 1),
        "launches_per_step": launches / (steps + 1),
        "top_kernels": [
            {"name": e.key[:80], "ms_per_step": e.self_device_time_total / 1000 / (steps + 1)}
            for e in top
        ],
    }


if __name__ == "__main__":
    main()

"""One engine, kept alive in its own process and measured on request by the benchmarks.

    python benchmarks/_engine_probe.py '{"variant": "template-graph", "size": "small"}'

Starts the engine and writes one JSON line to stdout (``init_s``), then reads
one JSON command per line from stdin and answers each with one JSON line:

- ``{"op": "decode", "batch": B, "tokens": N, "seed": S}``: one request batch;
  time to first token and decode tokens/s (the first call per batch shape
  warms that shape and is not reported);
- ``{"op": "prefill", "length": L, "seed": S}``: prefill tokens/s of one prompt;
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
    from vllm_platform_template.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template.embedded_model import PRESETS, ensure_model

    select_device(variant["device"])
    logs_to_stderr()
    model_dir = ensure_model(spec["size"])
    preset = PRESETS[spec["size"]]
    from vllm import LLM, SamplingParams

    from vllm_platform_template.cli.demo import checkpoint_dtype

    kwargs: dict[str, Any] = {
        "model": str(model_dir),
        "dtype": spec.get("dtype") or checkpoint_dtype(model_dir, variant["device"] or "cpu"),
        "max_model_len": preset.max_position_embeddings,
        "kv_cache_memory_bytes": spec.get("kv_cache_mib", 1024) << 20,
        "enable_prefix_caching": False,
        "seed": 0,
        "enforce_eager": variant.get("enforce_eager", False),
    }
    if "compilation" in variant:
        kwargs["compilation_config"] = variant["compilation"]
    if "template" in variant:
        kwargs["additional_config"] = {"template": variant["template"]}
    start = time.perf_counter()
    llm = LLM(**kwargs)
    init_s = time.perf_counter() - start
    vocab = preset.vocab_size

    def answer(payload: dict[str, Any]) -> None:
        answers.write(json.dumps(payload) + "\n")
        answers.flush()

    def timed(prompts: list[list[int]], max_tokens: int) -> float:
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        begin = time.perf_counter()
        llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return time.perf_counter() - begin

    answer({"variant": spec["variant"], "init_s": round(init_s, 2)})
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
            answer({"prefill_tok_s": length / timed(_prompt_ids(1, length, vocab, seed), 1)})
        else:
            answer({"error": f"unknown op {op!r}"})


if __name__ == "__main__":
    main()

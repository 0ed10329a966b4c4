"""One engine start and its measurements; run in a fresh process by the benchmarks.

    python benchmarks/_engine_probe.py '{"variant": "template-graph", "size": "small", ...}'

Prints one JSON object: init seconds, time to first token, prefill tokens/s,
decode tokens/s at batch 1 and batch N (medians of repeated requests).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    # stock vLLM CPU platform, plugin inactive, its default compile path
    "stock": {"device": None},
    "template-graph": {"device": "cpu", "template": {"compile_stage": "graph"}},
    "template-fusion_only": {"device": "cpu", "template": {"compile_stage": "fusion_only"}},
    "template-fused-model": {"device": "cpu", "template": {"model_impl": "fused"}},
    "stock-eager": {"device": None, "enforce_eager": True},
    "template-eager": {"device": "cpu", "enforce_eager": True},
}


def _prompt_ids(count: int, length: int, vocab: int, offset: int) -> list[list[int]]:
    return [
        [(7 + offset + 31 * i + 17 * j) % (vocab - 10) + 10 for j in range(length)]
        for i in range(count)
    ]


def main() -> None:
    spec = json.loads(sys.argv[1])
    variant = VARIANTS[spec["variant"]]
    from vllm_platform_template.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template.embedded_model import PRESETS, ensure_model

    select_device(variant["device"])
    logs_to_stderr()
    model_dir = ensure_model(spec["size"])
    from vllm import LLM, SamplingParams

    from vllm_platform_template.cli.demo import checkpoint_dtype

    kwargs: dict[str, Any] = {
        "model": str(model_dir),
        "dtype": spec.get("dtype") or checkpoint_dtype(model_dir),
        "max_model_len": 2048,
        "kv_cache_memory_bytes": spec.get("kv_cache_mib", 1024) << 20,
        "enable_prefix_caching": False,
        "seed": 0,
        "enforce_eager": variant.get("enforce_eager", False),
    }
    if "template" in variant:
        kwargs["additional_config"] = {"template": variant["template"]}
    start = time.perf_counter()
    llm = LLM(**kwargs)
    init_s = time.perf_counter() - start

    vocab = PRESETS[spec["size"]].vocab_size
    repeats = spec.get("repeats", 3)
    decode_tokens = spec.get("decode_tokens", 128)

    def timed(prompts: list[list[int]], max_tokens: int) -> float:
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        begin = time.perf_counter()
        llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return time.perf_counter() - begin

    results: dict[str, Any] = {"variant": spec["variant"], "init_s": round(init_s, 2)}
    for batch in (1, spec.get("batch", 8)):
        # Warm this batch shape first (kernel primitives and caches are per shape).
        timed(_prompt_ids(batch, 8, vocab, 99), 8)
        ttft, total = [], []
        for r in range(repeats):
            prompts = _prompt_ids(batch, 8, vocab, 1000 * r + batch)
            ttft.append(timed(prompts, 1))
            total.append(timed(prompts, decode_tokens + 1))
        decode_s = statistics.median(total) - statistics.median(ttft)
        results[f"decode_tok_s_b{batch}"] = round(batch * decode_tokens / decode_s, 1)
        if batch == 1:
            results["ttft_ms"] = round(1000 * statistics.median(ttft), 1)
    prefill_len = spec.get("prefill_len", 512)
    timed(_prompt_ids(1, prefill_len, vocab, 3), 1)  # warm the prefill shape
    prefill = [timed(_prompt_ids(1, prefill_len, vocab, 7 + r), 1) for r in range(repeats)]
    results["prefill_tok_s"] = round(prefill_len / statistics.median(prefill), 1)
    results["threads"] = os.environ.get("OMP_NUM_THREADS")
    print(json.dumps(results))


if __name__ == "__main__":
    main()

"""vLLM features on one engine of the embedded tiny model: what each answers, as JSON.

    python tests/shared/feature_runner.py DEVICE ENGINE [--late-output-thread]
                        # DEVICE: a template device type (VLLM_TEMPLATE_DEVICE) or stock

``ENGINE`` picks the engine and the features it serves (fp32, seeded, eager but where said):

- ``generate``: prefix caching and chunked prefill on (``max_num_batched_tokens`` 64, so
  a 300-token prompt is prefilled in chunks): structured output (JSON schema, regex,
  choice), prefix caching (the cached tokens of a prompt sent twice), chunked prefill
  (a long prompt's greedy tokens, and the scheduler's budget and chunking as the
  platform's config left them), prompt logprobs, ``n=2`` seeded sampling (twice: the
  seed's answer again), stop strings;
- ``ngram``: speculative decoding with vLLM's n-gram proposer (3 tokens), greedy tokens
  and the acceptance counts vLLM reports;
- ``draft``: the same with a draft model, the embedded ``tiny-draft`` (tiny's first
  layer, its embeddings and LM head);
- ``pooling``: the same checkpoint as an embedding model (``runner="pooling"``): the
  embedding vectors of two prompts;
- ``sleep``: ``enable_sleep_mode``: the engine's answer, or the error that refused it;
- ``offload``: prefix caching with the KV cache offloaded to host memory
  (``kv_offloading_size``, vLLM's own offloading connector) and a device cache of 64
  blocks: a long prompt, then prompts that evict its blocks from the device, then the
  long prompt again (its tokens, and how many came from the cache);
- ``classify``: the same checkpoint as a sequence classifier whose two labels are the LM
  head's rows for ``No`` and ``Yes`` (vLLM's ``classifier_from_token``, as for LLM
  rerankers): the class probability of two prompts (``LLM.classify``), a query scored
  against two documents (``LLM.score``), and the token ids the classifier reads;
- ``lora``: ``enable_lora`` with two rank-8 PEFT adapters the runner writes (seeded, on
  every layer's q_proj and v_proj, large enough to change greedy tokens), in the
  platform's default graph mode: each request alone (the base model, then each adapter),
  the base model and both adapters in one batch, the adapters swapped over the prompts;
  and the punica wrapper vLLM chose, the LoRA layers that wrap the model, the graph mode
  and how many of the template's graphs replayed;
- ``multimodal``: the embedded vision-language model ``tiny-blip2`` (BLIP-2, dummy weights
  from one seed): greedy tokens of one prompt with each of two images and without one,
  and the vision encoder's attention (vLLM's ``MMEncoderAttention``: its class and the
  backend the platform's ``get_vit_attn_backend`` gave it).

Prints one JSON line: the platform and its device type, the engine's answers per feature
(token ids, texts, vectors rounded to 1e-5, counts), or the error that refused the
engine, and whether a config check refused it or the engine died at start.
``tests/shared/test_features.py`` compares the template with stock vLLM.

Each runner is also a user's script that must exit cleanly: it stops nothing itself, and
as the interpreter is about to finalize (its first exit handler, which runs last) one
stderr line names vLLM's client output threads still alive. A thread that frees outputs
holding tensors (a pooling output is one) while the interpreter finalizes aborts the
process ("terminate called without an active exception"; the patch registry's
``client_threads_end_before_the_interpreter``). ``--late-output-thread`` makes that race
certain instead of occasional: the output thread wakes ``LATE_S`` late from its stop
signal, as on a host too busy to schedule it, so it is still alive at finalization
unless the main thread waits for it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

PROMPT = "It is a truth universally acknowledged,"
LONG_PROMPT = " ".join(["Elizabeth walked on, and said no more."] * 30)
# Two short prompts, for the engines that answer a pair (embeddings, classes, LoRA)
PROMPTS = [PROMPT, "Elizabeth walked on"]
LORA_RANK = 8
CHUNK_BUDGET = 64  # max_num_batched_tokens of the generate engine: a step's tokens at most
# One KV block of the tiny model: 16 tokens x 2 layers x K and V x 2 KV heads x 64 x fp32
OFFLOAD_BLOCK_BYTES = 16 * 2 * 2 * 2 * 64 * 4
# The checkpoint as a two-label classifier read from the LM head (single-token labels)
CLASSIFIER = {"architectures": ["LlamaForSequenceClassification"],
              "classifier_from_token": ["No", "Yes"], "method": "from_2_way_softmax"}  # fmt: skip
ENGINE_ARGS: dict[str, dict[str, Any]] = {
    "generate": {"enable_prefix_caching": True, "enable_chunked_prefill": True,
                 "max_num_batched_tokens": CHUNK_BUDGET, "max_num_seqs": 8},
    "ngram": {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3,
                                     "prompt_lookup_max": 4, "prompt_lookup_min": 2},
              "disable_log_stats": False},
    "draft": {"speculative_config": {"method": "draft_model", "num_speculative_tokens": 3},
              "disable_log_stats": False},
    "pooling": {"runner": "pooling"},
    "sleep": {"enable_sleep_mode": True},
    # 64 blocks of 16 tokens on the device: three 272-token prompts evict a fourth
    "offload": {"kv_offloading_size": 0.01, "enable_prefix_caching": True,
                "kv_cache_memory_bytes": 64 * OFFLOAD_BLOCK_BYTES},
    "classify": {"runner": "pooling", "hf_overrides": CLASSIFIER},
    # graphs as the platform chooses them: LoRA's operators inside recorded steps (batches
    # of at most 8: graphs of 1, 2, 4 and 8 tokens, not vLLM's 70 sizes)
    "lora": {"enable_lora": True, "max_loras": 2, "max_lora_rank": LORA_RANK,
             "enforce_eager": False, "enable_prefix_caching": False, "max_num_seqs": 8},
    "multimodal": {"limit_mm_per_prompt": {"image": 1}},
}  # fmt: skip
# vLLM 0.32's SyncMPClient output thread (vllm/v1/engine/core_client.py)
OUTPUT_THREAD = "EngineCoreOutputQueueThread"
EXIT_LINE = "output threads alive as the interpreter finalizes:"
LATE_S = 1.0


def _report_output_threads() -> None:
    alive = sorted(t.name for t in threading.enumerate() if t.name == OUTPUT_THREAD)
    print(f"{EXIT_LINE} {json.dumps(alive)}", file=sys.stderr, flush=True)


def _output_thread_wakes_late() -> None:
    """The output thread sleeps ``LATE_S`` after a poll that returns its stop signal (the
    one PAIR socket it polls; vLLM 0.32 ``SyncMPClient.process_outputs_socket``)."""
    import time

    import zmq

    poll = zmq.Poller.poll

    def late_poll(self: zmq.Poller, *args: Any, **kwargs: Any) -> list:
        events = poll(self, *args, **kwargs)
        if threading.current_thread().name == OUTPUT_THREAD and any(
            getattr(sock, "socket_type", None) == zmq.PAIR for sock, _ in events
        ):
            time.sleep(LATE_S)
        return events

    zmq.Poller.poll = late_poll  # type: ignore[method-assign]


def _ids(outputs: Any) -> list[list[int]]:
    return [list(o.outputs[0].token_ids) for o in outputs]


def generate_features(llm: Any) -> dict[str, Any]:
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    def greedy(**kw: Any) -> SamplingParams:
        return SamplingParams(temperature=0.0, max_tokens=kw.pop("max_tokens", 16), **kw)

    def text(prompt: str, params: SamplingParams) -> str:
        return llm.generate([prompt], params, use_tqdm=False)[0].outputs[0].text

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
              "age": {"type": "integer"}}, "required": ["name", "age"]}  # fmt: skip
    out: dict[str, Any] = {}
    as_json = StructuredOutputsParams(json=schema)
    out["structured_json"] = text(PROMPT, greedy(max_tokens=48, structured_outputs=as_json))
    regex = StructuredOutputsParams(regex=r"[a-z]{3,6} [0-9]{2}")
    out["structured_regex"] = text(PROMPT, greedy(max_tokens=12, structured_outputs=regex))
    choice = StructuredOutputsParams(choice=["Bennet", "Darcy", "Bingley"])
    out["structured_choice"] = text(PROMPT, greedy(structured_outputs=choice))
    first = llm.generate([LONG_PROMPT], greedy(), use_tqdm=False)[0]
    again = llm.generate([LONG_PROMPT], greedy(), use_tqdm=False)[0]
    out["prefix_caching"] = {"cached_first": first.num_cached_tokens,
                             "cached_again": again.num_cached_tokens,
                             "prompt_tokens": len(first.prompt_token_ids),
                             "same_tokens": list(first.outputs[0].token_ids)
                             == list(again.outputs[0].token_ids)}  # fmt: skip
    scheduler = llm.llm_engine.vllm_config.scheduler_config  # as the platform left it
    out["chunked_prefill"] = {"tokens": list(first.outputs[0].token_ids),
                              "prompt_tokens": len(first.prompt_token_ids),
                              "enabled": scheduler.enable_chunked_prefill,
                              "budget": scheduler.max_num_batched_tokens}  # fmt: skip
    logprobs = llm.generate([PROMPT], greedy(max_tokens=1, prompt_logprobs=2), use_tqdm=False)
    out["prompt_logprobs"] = [
        None if entry is None else sorted((tid, round(lp.logprob, 4)) for tid, lp in entry.items())
        for entry in logprobs[0].prompt_logprobs
    ]
    seeded = SamplingParams(n=2, temperature=0.8, seed=1234, max_tokens=12)
    for key in ("n2_seeded", "n2_seeded_again"):  # the same request twice: the seed decides
        sampled = llm.generate([PROMPT], seeded, use_tqdm=False)[0]
        out[key] = [list(c.token_ids) for c in sampled.outputs]
    stop = greedy(max_tokens=40, stop=[","])
    stopped = llm.generate([PROMPT], stop, use_tqdm=False)[0].outputs[0]
    out["stop_strings"] = {"text": stopped.text, "finish_reason": stopped.finish_reason}
    return out


def speculation_features(llm: Any) -> dict[str, Any]:
    from vllm import SamplingParams

    prompts = [LONG_PROMPT[:200], PROMPT]
    outputs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=32),
                           use_tqdm=False)  # fmt: skip
    metrics = {m.name: getattr(m, "value", None) for m in llm.get_metrics()
               if m.name.startswith("vllm:spec_decode")}  # fmt: skip
    prompt_ids = [list(o.prompt_token_ids) for o in outputs]
    return {"spec_tokens": _ids(outputs), "spec_prompt_ids": prompt_ids,
            "spec_decode_metrics": metrics}  # fmt: skip


def pooling_features(llm: Any) -> dict[str, Any]:
    outputs = llm.embed(PROMPTS, use_tqdm=False)
    return {"embeddings": [[round(x, 5) for x in o.outputs.embedding] for o in outputs]}


def sleep_features(llm: Any) -> dict[str, Any]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=12)
    before = _ids(llm.generate([PROMPT], params, use_tqdm=False))
    llm.sleep(level=1)
    llm.wake_up()
    return {"sleep_tokens": [before, _ids(llm.generate([PROMPT], params, use_tqdm=False))]}


def offload_features(llm: Any) -> dict[str, Any]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=16)
    first = llm.generate([LONG_PROMPT], params, use_tqdm=False)[0]
    for word in ("Jane", "Lydia", "Kitty"):  # other long prompts take the device's blocks
        llm.generate([LONG_PROMPT.replace("Elizabeth", word)], params, use_tqdm=False)
    again = llm.generate([LONG_PROMPT], params, use_tqdm=False)[0]
    return {"offload": {"tokens": [list(o.outputs[0].token_ids) for o in (first, again)],
                        "prompt_tokens": len(again.prompt_token_ids),
                        "cached_again": again.num_cached_tokens}}  # fmt: skip


def classify_features(llm: Any) -> dict[str, Any]:
    documents = ["Mr. Darcy is a gentleman of Derbyshire.", "The weather was fine."]
    tokenizer = llm.get_tokenizer()
    classified = llm.classify(PROMPTS, use_tqdm=False)
    scored = llm.score("Who is Mr. Darcy?", documents, use_tqdm=False)
    return {"classify": [list(o.outputs.probs) for o in classified],
            "classify_prompt_ids": [list(o.prompt_token_ids) for o in classified],
            "classifier_token_ids": tokenizer.convert_tokens_to_ids(
                CLASSIFIER["classifier_from_token"]),
            "score": [o.outputs.score for o in scored]}  # fmt: skip


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
            tensors[f"{name}.lora_A.weight"] = torch.randn(LORA_RANK, hidden, generator=gen) / 4
            tensors[f"{name}.lora_B.weight"] = torch.randn(size, LORA_RANK, generator=gen) / 4
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": LORA_RANK,
        "lora_alpha": 2 * LORA_RANK, "lora_dropout": 0.0, "bias": "none",
        "fan_in_fan_out": False, "target_modules": sorted(outputs),
        "base_model_name_or_path": str(model_dir),
    }))  # fmt: skip
    return out


def lora_features(llm: Any) -> dict[str, Any]:
    from vllm import SamplingParams
    from vllm.lora.request import LoRARequest

    model_dir = Path(llm.llm_engine.vllm_config.model_config.model)
    folder = Path(tempfile.mkdtemp(prefix="lora-adapters-"))
    try:
        lora = [LoRARequest(f"adapter{i}", i, str(write_adapter(model_dir, folder / str(i), i)))
                for i in (1, 2)]  # fmt: skip
        params = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)

        def ids(prompts: list[str], requests: list[Any]) -> list[list[int]]:
            return _ids(llm.generate(prompts, params, lora_request=requests, use_tqdm=False))

        out = {
            # each alone first: the base model, then each adapter, a batch each
            "lora_alone": [ids(PROMPTS, [r] * len(PROMPTS)) for r in (None, *lora)],
            # the base model and both adapters in one batch
            "lora_mixed": ids(PROMPTS * 3, [None, None, lora[0], lora[0], lora[1], lora[1]]),
            # the adapters swapped over the prompts, in another step
            "lora_swapped": ids(PROMPTS, [lora[1], lora[0]]),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out.update(llm.collective_rpc(_lora_layers)[0])
    out["graph_mode"] = str(llm.llm_engine.vllm_config.compilation_config.cudagraph_mode)
    return out


def _lora_layers(worker: Any) -> dict[str, Any]:
    """The punica wrapper and the LoRA layer classes in the worker's model."""
    runner = worker.model_runner
    adapter_manager = getattr(getattr(runner, "lora_manager", None), "_adapter_manager", None)
    wrappers = getattr(adapter_manager, "punica_wrapper_mapping", {}).values()
    names = {type(m).__name__ for m in runner.get_model().modules()}
    from vllm_platform_template.graph_wrapper.stats import FULL_STATS, STATS

    return {
        "punica_wrapper": sorted(
            {f"{type(w).__module__}.{type(w).__qualname__}" for w in wrappers}
        ),
        "lora_layers": sorted(n for n in names if "WithLoRA" in n),
        # the template's graphs replayed in this worker (stock's are not counted)
        "graph_replays": sum(FULL_STATS.replays.values()) + sum(STATS.replays.values()),
    }


def images() -> list[Any]:
    """Two images, the same in every process: seeded noise (80 x 64) and a flat colour
    (40 x 40); the processor resizes both to the encoder's 56 x 56."""
    import numpy as np
    from PIL import Image

    noise = np.random.default_rng(0).integers(0, 256, (64, 80, 3), dtype=np.uint8)
    return [Image.fromarray(noise), Image.fromarray(np.full((40, 40, 3), (200, 30, 90), np.uint8))]


def multimodal_features(llm: Any) -> dict[str, Any]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=16)
    requests = [{"prompt": PROMPT, "multi_modal_data": {"image": image}} for image in images()]
    outputs = llm.generate([*requests, PROMPT], params, use_tqdm=False)
    return {"image_tokens": _ids(outputs),
            "image_prompt_ids": [list(o.prompt_token_ids) for o in outputs],
            **llm.collective_rpc(_encoder_attention)[0]}  # fmt: skip


def _encoder_attention(worker: Any) -> dict[str, Any]:
    """The vision encoder's attention modules: their classes and backends."""
    from vllm.model_executor.layers.attention.mm_encoder_attention import MMEncoderAttention

    found = [m for m in worker.model_runner.get_model().modules()
             if isinstance(m, MMEncoderAttention)]  # fmt: skip
    return {"encoder_attention": sorted({f"{type(m).__qualname__}: {m.attn_backend.name}"
                                         for m in found})}  # fmt: skip


FEATURES = {"generate": generate_features, "ngram": speculation_features,
            "draft": speculation_features,
            "pooling": pooling_features, "sleep": sleep_features,
            "offload": offload_features, "classify": classify_features,
            "lora": lora_features, "multimodal": multimodal_features}  # fmt: skip


def main(device: str, engine: str, late_output_thread: bool) -> None:
    atexit.register(_report_output_threads)  # before vLLM's exit handlers: runs after them
    if late_output_thread:
        _output_thread_wakes_late()
    from vllm_platform_template_tools.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template_tools.embedded_model import default_cache_dir, ensure_model
    from vllm_platform_template_tools.embedded_model.vision_language import (
        ensure_vision_language_model,
    )

    select_device(None if device == "stock" else device)
    logs_to_stderr()
    if engine == "multimodal":
        model_dir = ensure_vision_language_model(default_cache_dir())
    else:
        model_dir = ensure_model("tiny")
    from vllm import LLM
    from vllm.platforms import current_platform

    report: dict[str, Any] = {"engine": engine, "platform": type(current_platform).__name__,
                              "device_type": current_platform.device_type}  # fmt: skip
    try:
        args = {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20, **ENGINE_ARGS[engine]}
        if engine == "draft":  # the draft model's directory, written on first use
            draft = str(ensure_model("tiny-draft"))
            args["speculative_config"] = {**args["speculative_config"], "model": draft}
        llm = LLM(model=str(model_dir), dtype="float32", seed=0, max_model_len=512, **args)
    except Exception as exc:  # refused: the refusal is the answer
        report["refused"] = f"{type(exc).__name__}: {exc}"[:600]
        # a config check (vLLM's, or the platform's) raises ValueError (pydantic's
        # ValidationError is one) before any engine process starts; anything else is a
        # crash of the engine at start
        report["refused_at"] = "config" if isinstance(exc, ValueError) else "start"
        print(json.dumps(report), flush=True)
        return
    report.update(FEATURES[engine](llm))
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    if sys.argv[2] in ("lora", "multimodal"):  # collective_rpc sends a function
        os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    main(sys.argv[1], sys.argv[2], "--late-output-thread" in sys.argv[3:])

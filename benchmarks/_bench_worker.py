"""A worker extension (``worker_extension_cls``) that lets the benchmark ask an engine's worker.

Every engine of ``gpu_e2e.py`` gets the same extension (so the argument is
identical across engines); nothing in it runs until the benchmark calls it
through ``LLM.collective_rpc``, after the measured rounds:

- ``bench_describe``: the configuration the worker runs with, after every
  platform and engine-core update (dtype, scheduler limits, chunked prefill,
  compilation and graph modes, compile ranges, the attention backend of each
  layer and the FlashAttention version vLLM picks, the model runner);
- ``bench_record_start`` / ``bench_record_stop``: every engine step in between
  (tokens and requests scheduled, host seconds), optionally its span on the
  device (``events``: a CUDA event recorded when the runner's step starts,
  ``execute_model``, and one when it ends, the end of ``sample_tokens`` where the
  worker splits sampling off; their elapsed time is the step's span on the GPU's
  clock, kernels and the gaps between them), and optionally a torch-profiler
  trace of the same span (``profile``: GPU kernel time, launches, top kernels,
  with ``every_kernel`` each kernel's time and count by name).
  The two are separate passes: the profiler's own host work would widen the spans.
"""

from __future__ import annotations

import re
import time
from typing import Any


def _attention_backends(vllm_config: Any) -> list[str]:
    names = set()
    for layer in vllm_config.compilation_config.static_forward_context.values():
        backend = getattr(layer, "attn_backend", None)
        if backend is not None:
            impl = type(getattr(layer, "impl", None)).__name__
            names.add(f"{backend.get_name()} ({impl})")
    return sorted(names)


def _flash_attn_version() -> int | str | None:
    """The FlashAttention version vLLM would pick here (3 on Hopper), or why none."""
    try:
        from vllm.v1.attention.backends.fa_utils import get_flash_attn_version

        return get_flash_attn_version()
    except Exception as exc:  # CPU builds have no FlashAttention: a fact, not a failure
        return f"{type(exc).__name__}: {exc}"


def _true_flags(config: Any) -> list[str]:
    """The boolean options switched on in a config object (the compile passes)."""
    try:
        return sorted(k for k, v in vars(config).items() if v is True)
    except TypeError:
        return []


def describe(vllm_config: Any, model_runner: Any) -> dict[str, Any]:
    """The facts that tell two engines' configurations apart (JSON-ready)."""
    from vllm.platforms import current_platform

    sched, comp = vllm_config.scheduler_config, vllm_config.compilation_config
    model, cache = vllm_config.model_config, vllm_config.cache_config
    pass_config = getattr(comp, "pass_config", None)
    return {
        "dtype": str(model.dtype),
        "kv_cache_dtype": str(cache.cache_dtype),
        "block_size": cache.block_size,
        "max_model_len": model.max_model_len,
        "max_num_batched_tokens": sched.max_num_batched_tokens,
        "max_num_seqs": sched.max_num_seqs,
        "enable_chunked_prefill": getattr(sched, "enable_chunked_prefill", None),
        "long_prefill_token_threshold": getattr(sched, "long_prefill_token_threshold", None),
        "max_num_partial_prefills": getattr(sched, "max_num_partial_prefills", None),
        "async_scheduling": getattr(sched, "async_scheduling", None),
        "compilation_mode": str(comp.mode),
        "cudagraph_mode": str(comp.cudagraph_mode),
        "max_cudagraph_capture_size": comp.max_cudagraph_capture_size,
        "cudagraph_capture_sizes": list(comp.cudagraph_capture_sizes or []),
        "compile_ranges_endpoints": list(getattr(comp, "compile_ranges_endpoints", None) or []),
        "compile_sizes": list(comp.compile_sizes or []),
        "splitting_ops": list(comp.splitting_ops or []),
        "fusion_passes": _true_flags(pass_config),
        "attention_backends": _attention_backends(vllm_config),
        "flash_attn_version": _flash_attn_version(),
        "use_v2_model_runner": getattr(vllm_config, "use_v2_model_runner", None),
        "model_runner": type(model_runner).__qualname__,
        "platform": type(current_platform).__qualname__,
    }


# Kernel families by name (first match), for a profile's time per family.
KERNEL_FAMILIES = (
    ("KV write", re.compile(r"reshape_and_cache|kv_cache|cache_update", re.I)),
    ("attention", re.compile(r"flash|attn|attention|paged", re.I)),
    ("GEMM", re.compile(r"gemm|cutlass|nvjet|sm90_xmma|cublas|matmul|_mm_|dot", re.I)),
    # Inductor names a fused kernel after its ops: an RMS norm is a mean, a pow and an rsqrt
    ("norm", re.compile(r"norm|rsqrt", re.I)),
    ("rotary", re.compile(r"rotary|rope|cos_sin", re.I)),
    ("activation", re.compile(r"silu|gelu|act_and_mul", re.I)),
    ("copy, fill, elementwise", re.compile(r"copy|fill|elementwise|memcpy|memset|cat", re.I)),
)


def kernel_family(name: str) -> str:
    return next((family for family, pattern in KERNEL_FAMILIES if pattern.search(name)), "other")


def top_kernels(prof: Any, limit: int = 10, every: bool = False) -> dict[str, Any]:
    """GPU kernel time, launch count, the heaviest kernels and the time per kernel family
    of a finished torch profile; with ``every``, also each kernel's time and count by its
    full name (``kernels``)."""
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    heavy = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:limit]
    categories: dict[str, float] = {}
    for e in kernels:
        family = kernel_family(e.key)
        categories[family] = categories.get(family, 0.0) + e.self_device_time_total / 1000
    out: dict[str, Any] = {}
    if every:
        out["kernels"] = {
            e.key: {"ms": e.self_device_time_total / 1000, "count": e.count} for e in kernels
        }
    return out | {
        "gpu_ms": sum(e.self_device_time_total for e in kernels) / 1000,
        "launches": sum(e.count for e in kernels),
        "categories": dict(sorted(categories.items(), key=lambda kv: -kv[1])),
        "top_kernels": [
            {"name": e.key[:100], "ms": e.self_device_time_total / 1000, "count": e.count}
            for e in heavy
        ],
    }


class BenchWorkerExtension:
    """Mixed into the engine's worker class by vLLM (``worker_extension_cls``)."""

    vllm_config: Any
    model_runner: Any
    execute_model: Any

    def bench_describe(self) -> dict[str, Any]:
        return describe(self.vllm_config, self.model_runner)

    def bench_record_start(
        self, profile: bool = False, events: bool = False, every_kernel: bool = False
    ) -> None:
        import torch

        steps: list[dict[str, Any]] = []
        spans: list[tuple[Any, Any]] = []
        execute, sample = self.execute_model, getattr(self, "sample_tokens", None)

        def end_event() -> Any:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event

        def execute_model(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
            tokens = getattr(scheduler_output, "total_num_scheduled_tokens", 0)
            begin = time.perf_counter()
            start = end_event() if events and tokens else None
            out = execute(scheduler_output, *args, **kwargs)
            if tokens:
                steps.append(
                    {
                        "tokens": tokens,
                        "requests": len(getattr(scheduler_output, "num_scheduled_tokens", {})),
                        "host_s": time.perf_counter() - begin,
                    }
                )
                if start is not None:
                    spans.append((start, end_event()))
            return out

        def sample_tokens(*args: Any, **kwargs: Any) -> Any:
            out = sample(*args, **kwargs)
            if events and spans:  # the step ends once its tokens are sampled
                spans[-1] = (spans[-1][0], end_event())
            return out

        self.execute_model = execute_model
        if sample is not None:
            self.sample_tokens = sample_tokens
        self._bench_steps, self._bench_spans = steps, spans
        self._bench_profile, self._bench_every_kernel = None, every_kernel
        if profile:
            from torch.profiler import ProfilerActivity
            from torch.profiler import profile as torch_profile

            self._bench_profile = torch_profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]
            )
            self._bench_profile.__enter__()

    def bench_record_stop(self) -> dict[str, Any]:
        import torch

        # the class's own methods again
        del self.execute_model
        if "sample_tokens" in vars(self):
            del self.sample_tokens
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        steps = self._bench_steps
        for step, (start, end) in zip(steps, self._bench_spans, strict=False):
            step["device_span_ms"] = start.elapsed_time(end)
        out: dict[str, Any] = {"steps": steps}
        if self._bench_profile is not None:
            self._bench_profile.__exit__(None, None, None)
            out |= top_kernels(self._bench_profile, every=self._bench_every_kernel)
        return out

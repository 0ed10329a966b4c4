"""A worker extension (``worker_extension_cls``) that lets the benchmark ask an engine's worker.

Every engine of ``gpu_e2e.py`` gets the same extension (so the argument is
identical across engines); nothing in it runs until the benchmark calls it
through ``LLM.collective_rpc``, after the measured rounds:

- ``bench_describe``: the configuration the worker runs with, after every
  platform and engine-core update (dtype, scheduler limits, chunked prefill,
  compilation and graph modes, compile ranges, the attention backend of each
  layer and the FlashAttention version vLLM picks, the model runner);
- ``bench_record_start`` / ``bench_record_stop``: every ``execute_model`` call
  in between (tokens and requests scheduled, host seconds), and optionally a
  torch-profiler trace of the same span (GPU kernel time, launches, top
  kernels): how many engine steps a prefill took and where its time went.
"""

from __future__ import annotations

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


def top_kernels(prof: Any, limit: int = 10) -> dict[str, Any]:
    """GPU kernel time, launch count and the heaviest kernels of a finished torch profile."""
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    heavy = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:limit]
    return {
        "gpu_ms": sum(e.self_device_time_total for e in kernels) / 1000,
        "launches": sum(e.count for e in kernels),
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

    def bench_record_start(self, profile: bool = False) -> None:
        steps: list[dict[str, Any]] = []
        original = self.execute_model

        def execute_model(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
            begin = time.perf_counter()
            out = original(scheduler_output, *args, **kwargs)
            tokens = getattr(scheduler_output, "total_num_scheduled_tokens", 0)
            if tokens:
                steps.append(
                    {
                        "tokens": tokens,
                        "requests": len(getattr(scheduler_output, "num_scheduled_tokens", {})),
                        "host_s": time.perf_counter() - begin,
                    }
                )
            return out

        self.execute_model = execute_model
        self._bench_steps = steps
        self._bench_profile = None
        if profile:
            from torch.profiler import ProfilerActivity
            from torch.profiler import profile as torch_profile

            self._bench_profile = torch_profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]
            )
            self._bench_profile.__enter__()

    def bench_record_stop(self) -> dict[str, Any]:
        import torch

        del self.execute_model  # the class's own method again
        out: dict[str, Any] = {"steps": self._bench_steps}
        if self._bench_profile is not None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self._bench_profile.__exit__(None, None, None)
            out |= top_kernels(self._bench_profile)
        return out

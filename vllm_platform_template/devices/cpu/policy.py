"""Config policy of the CPU device, as small pure functions.

vLLM hooks: the CPU platform's ``apply_config_platform_defaults`` and
``check_and_update_config`` (``platform.py``) read the config, call these and
write the result; each is unit-tested without building a ``VllmConfig``
(``tests/unit/test_policy.py``). They restore what stock vLLM does on
``is_cpu()``, which an out-of-tree platform is not.
"""

from __future__ import annotations

# Inductor options vLLM adds for every non-CPU platform that its CPU codegen
# does not support ("combo kernel does not support cpu yet", config/compilation.py).
CPU_UNSUPPORTED_INDUCTOR_KEYS = ("combo_kernels", "benchmark_combo_kernel")

# vLLM's generic (max_num_batched_tokens, max_num_seqs) defaults, by usage
# context, mapped to the CPU defaults stock vLLM uses instead (engine/arg_utils.py).
_GENERIC_TO_CPU_SCHEDULER_DEFAULTS = {
    (8192, 256): (4096, 256),  # LLM class, < 70 GiB memory
    (2048, 256): (2048, 128),  # API server, < 70 GiB
    (16384, 1024): (4096, 256),  # LLM class, >= 70 GiB
    (8192, 1024): (2048, 128),  # API server, >= 70 GiB
}


def cpu_scheduler_defaults(
    max_num_batched_tokens: int, max_num_seqs: int, world_size: int
) -> tuple[int, int] | None:
    """Stock vLLM's CPU batch limits where vLLM applied its generic GPU defaults.

    vLLM picks CPU defaults only when ``is_cpu()``; the values reaching the
    platform cannot tell a default from the same numbers set by hand, so only
    the exact generic default pairs are replaced (and logged).
    """
    cpu = _GENERIC_TO_CPU_SCHEDULER_DEFAULTS.get((max_num_batched_tokens, max_num_seqs))
    if cpu is None:
        return None
    return cpu[0] * world_size, cpu[1] * world_size


def ray_executor_problem(uses_ray: bool, ray_v2_executor: bool) -> str | None:
    """Why the CPU platform refuses vLLM's legacy Ray executor (None: no problem).

    ``RayDistributedExecutor`` (``VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0``) runs each step
    through a Ray compiled graph, on a thread Ray owns (vLLM's comment on
    ``RayWorkerWrapper``); measured on vLLM 0.32.0 with TP=2, its first step dies in
    vLLM's CPU attention ("cpu_attn_impl.hpp: Check failed:
    input->metadata->thread_num == thread_num (2 vs. 1)"): the OpenMP thread count the
    step sees is not the one its attention metadata was planned with. The default
    ``RayExecutorV2`` runs each step on the worker's main thread and passes.
    """
    if not uses_ray or ray_v2_executor:
        return None
    return (
        "the template CPU platform runs vLLM's default Ray executor (RayExecutorV2); "
        "VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0 selects the legacy compiled-graph executor, "
        "whose first step fails in vLLM's CPU attention (a thread-count check). Unset "
        "VLLM_USE_RAY_V2_EXECUTOR_BACKEND (or set it to 1)"
    )

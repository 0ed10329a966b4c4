"""Config policy of the CPU device, as small pure functions.

vLLM hook: the CPU platform's ``check_and_update_config`` (``platform.py``)
reads the config, calls these and writes the result; each is unit-tested
without building a ``VllmConfig`` (``tests/shared/test_policy.py``). They
restore what stock vLLM does on ``is_cpu()``, which an out-of-tree platform is not.
"""

from __future__ import annotations

# Inductor options vLLM adds for every non-CPU platform that its CPU codegen
# does not support ("combo kernel does not support cpu yet", config/compilation.py).
CPU_UNSUPPORTED_INDUCTOR_KEYS = ("combo_kernels", "benchmark_combo_kernel")


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

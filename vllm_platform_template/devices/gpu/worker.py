"""The device's worker: vLLM's accelerator worker (``gpu_worker``) with the platform's answers.

vLLM hooks served: ``parallel_config.worker_cls`` (set in
``check_and_update_config``), and through it the device, the memory pool,
sleep mode, the model runner and its sampler (docs/porting-guide.md, "4. Worker
and model runner" (first light) and "8. Model Runner V2" (speed)).

- Device: vLLM's ``gpu_worker.Worker.init_device`` serves vLLM's own device types
  only (any other: "Unsupported device type"). :meth:`TemplateGpuWorker.init_device`
  takes the same steps for the identity's device: bind the rank's device
  through the platform, check the dtype, start the distributed environment
  with the identity's ``dist_backend``, seed, take the memory snapshot the KV
  cache is sized from, build the model runner.
- Memory pool and sleep mode: vLLM's worker runs the model runner, memory
  profiling and graph capture on any torch device; it only asks an out-of-tree
  platform for one thing it cannot give: a memory pool for weights and KV
  cache. vLLM returns a plain allocation context for its in-tree platforms and
  otherwise reaches for its sleep-mode allocator (``CuMemAllocator``, compiled
  for one vendor's runtime). This platform has no sleep mode (``is_sleep_mode_available()`` is
  False, so vLLM's config refuses ``enable_sleep_mode``): tensors come from
  torch's caching allocator.
- Model runner and sampler: the worker builds vLLM's own choice
  (``VllmConfig.use_v2_model_runner``). With a kernel compiler in the identity
  that is Model Runner V2 (speed), which prepares its inputs and samples with
  vLLM's own compiled kernels on the device and keeps its batch in pinned buffers read
  through device views (``views.py``). Without one the platform picks V1 (first
  light): vLLM's torch sampler, and its one per-step compiled kernel in torch.

- FULL graphs: after vLLM's warm-up and capture (``compile_or_warm_up_model``;
  without a kernel compiler, the V1 runner's capture where the identity names a
  graph API) the FULL graphs are counted for the report and the tests: Model Runner
  V2's by the worker (``graph_wrapper.stats.watch_full_graphs``), V1's by their
  wrapper (``graph_wrapper/full.py``).

Proven by ``tests/devices/gpu/test_gpu_platform.py`` (the worker and memory pool the
platform names), ``tests/devices/gpu/test_gpu_first_light.py`` (the worker on the
device; in CI, a generated plugin's on the PrivateUse1 test device).
"""

from __future__ import annotations

import gc
from contextlib import AbstractContextManager, nullcontext

import torch
from vllm.config import CUDAGraphMode
from vllm.distributed.parallel_state import get_pp_group
from vllm.platforms import current_platform
from vllm.utils.mem_utils import MemorySnapshot
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.utils import request_memory
from vllm.v1.worker.worker_base import CompilationTimes

from vllm_platform_template.devices.gpu.availability import graph_api
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.graph_wrapper.stats import watch_full_graphs
from vllm_platform_template.platform_hooks.worker_reports import TemplateWorkerReports


class TemplateGpuWorker(TemplateWorkerReports, Worker):
    """vLLM's ``Worker`` for this folder's platform."""

    def init_device(self) -> None:
        """vLLM's ``Worker.init_device`` steps, for the identity's device type."""
        index = current_platform.logical_device_id_to_visible_device_id(self.local_rank)
        self.device = torch.device(IDENTITY.device_type, index)
        current_platform.set_device(self.device)
        dtype = self.model_config.dtype
        assert isinstance(dtype, torch.dtype)  # resolved by vLLM's ModelConfig
        current_platform.check_if_supports_dtype(dtype)
        init_worker_distributed_environment(
            self.vllm_config,
            self.rank,
            self.distributed_init_method,
            self.local_rank,
            current_platform.dist_backend,
        )
        set_random_seed(self.model_config.seed)
        gc.collect()
        torch.accelerator.empty_cache()
        self.init_snapshot = MemorySnapshot(device=self.device)
        self.requested_memory = request_memory(self.init_snapshot, self.cache_config)
        self._init_workspace_and_model_runner()

    def compile_or_warm_up_model(self) -> CompilationTimes:
        """Without a kernel compiler (nothing to compile or warm): the V1 sampler's warm-up,
        the graphs where the identity names a graph API (captured in this phase only: a
        capture records without running), the seed reset. With one, vLLM's warm-up."""
        if IDENTITY.kernel_compiler is not None:
            times = super().compile_or_warm_up_model()
            watch_full_graphs(self.model_runner)  # after capture: what the report counts
            return times
        if get_pp_group().is_last_rank:
            max_num_reqs = min(
                self.scheduler_config.max_num_seqs, self.scheduler_config.max_num_batched_tokens
            )
            hidden_states, last_hidden_states = self.model_runner._dummy_run(
                num_tokens=max_num_reqs, skip_eplb=True, cudagraph_runtime_mode=CUDAGraphMode.NONE
            )
            if self.model_runner.is_pooling_model:
                self.model_runner._dummy_pooler_run(hidden_states)
            else:
                self.model_runner._dummy_sampler_run(hidden_states=last_hidden_states)
        if graph_api() is not None and not self.model_config.enforce_eager:
            with self._get_cudagraph_capture_context():
                self.model_runner.capture_model()
        set_random_seed(self.model_config.seed, self.parallel_config.data_parallel_index)
        return CompilationTimes(
            language_model=self.compilation_config.compilation_time,
            encoder=self.compilation_config.encoder_compilation_time,
        )

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        return nullcontext()

"""The CPU fast paths vLLM 0.32 gates on ``is_cpu()``, restored through the worker.

An out-of-tree platform reports ``PlatformEnum.OOT``, so ``is_cpu()`` is False
and vLLM silently skips its CPU fast paths. Measured on a 2-core EPYC with a
~100M bf16 Llama, a naive OOT CPU platform decodes at 0.5-0.7x stock.
The template wins them back with its own hooks - the worker
subclass and the platform's config hooks - never by reporting ``is_cpu()``
(that would also route CustomOps to ``forward_cpu`` and bypass the plugin's
own ``forward_oot`` kernels):

==========================================  ======================================
vLLM gate (0.32)                            restored by
==========================================  ======================================
``utils/ompmultiprocessing.py`` OpenMP      :func:`bind_worker_threads` in the
thread binding and core reservation          worker's ``__init__``
``layers/linear.py``, ``layers/utils.py``   ``patches.use_packed_cpu_gemm``
packed oneDNN GEMM (``dispatch_cpu_          after ``load_model``
unquantized_gemm``), lm_head too
``v1/sample/sampler.py`` greedy argmax      ``patches.use_cpu_sampler`` after
kernel; ``topk_topp_sampler.py`` CPU path    ``init_device``
``engine/arg_utils.py`` CPU batch defaults  ``patches.cpu_batch_defaults`` (process patch)
``config/compilation.py`` combo kernels     ``policy.CPU_UNSUPPORTED_INDUCTOR_KEYS``
``CustomOp`` ``forward_cpu`` (rotary)       ``custom_ops.rotary_embedding``
==========================================  ======================================

The GEMM, sampler and batch-default rows rebind vLLM objects, so their code is
in this folder's entries of the patch registry (``devices/cpu/patches.py``) with
why and when to remove it; this module keeps the
thread binding, which changes only the process's own state.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from vllm_platform_template.log import get_logger

logger = get_logger(__name__)


def stock_cpu_ids(vllm_config: Any, local_rank: int) -> list[int] | None:
    """The cores vLLM's ``OMPProcessManager`` would bind rank ``local_rank`` to (None: no bind).

    Mirrors its policies: ``VLLM_CPU_OMP_THREADS_BIND`` = ``auto`` (one logical CPU
    per physical core on the rank's NUMA node, minus ``VLLM_CPU_NUM_OF_RESERVED_CPU``
    cores, default one per rank, left to the engine process), ``nobind``, or an
    explicit ``"0-3|4-7"`` list per rank.
    """
    from vllm import envs
    from vllm.utils import cpu_resource_utils

    mask = envs.VLLM_CPU_OMP_THREADS_BIND
    world = vllm_config.parallel_config.local_world_size
    if mask == "nobind":
        return None
    if mask != "auto":
        lists = mask.split("|")
        dp_rank = vllm_config.parallel_config.data_parallel_rank_local
        if dp_rank is not None:
            lists = lists[dp_rank * world : (dp_rank + 1) * world]
        return cpu_resource_utils.parse_id_list(lists[local_rank])
    nodes = cpu_resource_utils.get_visible_memory_node()
    if len(nodes) < world:
        # vLLM's auto-bind gives each rank its own NUMA node and refuses otherwise.
        logger.warning(
            "template: %d ranks on %d NUMA node(s): threads not bound; set "
            "VLLM_CPU_OMP_THREADS_BIND (e.g. '0|1') to bind them",
            world,
            len(nodes),
        )
        return None
    cpus = cpu_resource_utils.get_allowed_cpu_list()
    per_rank: list[list[int]] = []
    for rank in range(world):
        node = nodes[rank]
        by_core: dict[int, list[Any]] = {}
        for cpu in cpus:
            if cpu.numa_node == node:
                by_core.setdefault(cpu.physical_core, []).append(cpu)
        chosen = sorted(max(group, key=lambda c: c.id).id for group in by_core.values())
        per_rank.append(chosen)
    reserve = envs.VLLM_CPU_NUM_OF_RESERVED_CPU
    reserve = world if reserve is None else reserve
    if sum(len(ids) for ids in per_rank) > reserve:
        cuts = [reserve // world] * world
        for i in range(world - 1, world - 1 - reserve % world, -1):
            cuts[i] += 1
        per_rank = [ids[:-cut] if cut else ids for ids, cut in zip(per_rank, cuts, strict=True)]
    return per_rank[local_rank] or None


def bind_worker_threads(vllm_config: Any, local_rank: int) -> list[int] | None:
    """Pin this worker process and size its OpenMP pool as vLLM does for stock CPU.

    Must run before ``CPUWorker.__init__`` (whose ``init_device`` later turns
    ``torch.set_num_threads`` into a no-op). Only where each worker has a process
    of its own: the multiprocess executor, as in stock vLLM, and vLLM's Ray executor
    (stock vLLM CPU has none; ``local_rank`` counts the workers on this host). An
    in-process engine shares its process with the front end.
    """
    if vllm_config.parallel_config.distributed_executor_backend not in ("mp", "ray"):
        return None
    ids = stock_cpu_ids(vllm_config, local_rank)
    if not ids:
        return None
    os.sched_setaffinity(0, ids)  # OpenMP threads created later inherit this mask
    torch.set_num_threads(len(ids))
    os.environ["OMP_NUM_THREADS"] = str(len(ids))
    # vLLM marks an OMP_NUM_THREADS it chose itself and later resets it; ours stays.
    os.environ.pop("VLLM_OMP_NUM_THREADS_SET_BY_VLLM", None)
    logger.info("template: worker %d bound to CPUs %s (%d threads)", local_rank, ids, len(ids))
    return ids

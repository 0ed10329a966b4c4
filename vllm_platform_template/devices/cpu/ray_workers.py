"""vLLM's Ray executor on a platform whose Ray resource is its own, not a Ray accelerator.

vLLM's default Ray executor (``RayExecutorV2``, vllm/v1/executor/ray_executor_v2.py,
``VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1``) reserves one unit of the platform's
``ray_device_key`` per worker in a placement group and starts each worker as a Ray
actor in one of its bundles. The template CPU platform's key is a custom resource
(``CPU_RAY_RESOURCE``, in this folder's ``__init__``) that each Ray node declares. Two
places in vLLM 0.32
assume the key is a Ray accelerator (GPU, TPU, ...) and are replaced here, through the
patch registry (``patches.py``, ``ray_custom_resource``):

- ``RayWorkerProc.get_node_and_physical_gpu_ids`` indexes
  ``ray.get_runtime_context().get_accelerator_ids()``, which holds Ray's built-in
  accelerators only: ``KeyError`` for any other key. :class:`TemplateRayWorkerProc`
  answers no device ids for a custom resource (a CPU worker has no device to pick;
  it binds its threads by local rank, ``VLLM_CPU_OMP_THREADS_BIND``).
- ``initialize_ray_cluster`` starts a local Ray instance when it finds no cluster,
  declaring only what Ray detects (CPUs, memory), then waits up to
  ``PG_WAIT_TIMEOUT`` (1800 s) for a placement group that no node can hold.
  :func:`with_resource_check` starts that local instance declaring the resource, one
  unit per worker, and refuses at once - saying what to do - when the cluster it joins
  declares fewer units than the engine has workers.

The actor class travels to the Ray workers by reference (module and name), so
:class:`TemplateRayWorkerProc` lives at module level here. This module imports vLLM's
Ray executor and therefore Ray: only the patch imports it, once vLLM has imported its
Ray executor.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import ray
from vllm.v1.executor.ray_executor_v2 import RayWorkerProc
from vllm.v1.executor.ray_utils import PG_WAIT_TIMEOUT

from vllm_platform_template.log import get_logger

logger = get_logger(__name__)

# ray.init refuses node resources when it joins a running cluster ("When connecting to
# an existing cluster, resources must not be provided"): the node declares its own.
_JOINING_MARK = "existing cluster"
# Said when no local Ray instance could start (tests/full_plugin/test_ray.py skips on it).
COULD_NOT_START = "could not start a local Ray instance"


class TemplateRayWorkerProc(RayWorkerProc):
    """vLLM's Ray worker actor, for a ``ray_device_key`` that is not a Ray accelerator."""

    def get_node_and_physical_gpu_ids(self) -> tuple[str, list[int]]:
        from vllm.platforms import current_platform

        context = ray.get_runtime_context()
        if current_platform.ray_device_key in context.get_accelerator_ids():
            return super().get_node_and_physical_gpu_ids()
        return context.get_node_id(), []


def missing_resource(key: str, declared: float, needed: int) -> str | None:
    """Why a cluster declaring ``declared`` units of ``key`` cannot run ``needed`` workers."""
    if declared >= needed:
        return None
    resources = '{"' + key + '": N}'
    return (
        f"the Ray cluster declares {declared:g} '{key}' and this engine needs {needed} (one "
        "per worker: tensor x pipeline parallel size), so vLLM would wait "
        f"{PG_WAIT_TIMEOUT} s for a placement group it cannot get. Declare the resource on "
        "each Ray node, N = the workers that host may run: `ray start --head --resources "
        f"'{resources}'` on the first host, `ray start --address=HEAD_IP:6379 --resources "
        f"'{resources}'` on the others; or, on one host, run with no Ray cluster "
        "(RAY_ADDRESS unset, no `ray start`) and the template platform starts a local one "
        "declaring it."
    )


def _join_or_start(parallel_config: Any, ray_address: str | None, key: str) -> None:
    """``ray.init`` as vLLM calls it, declaring ``key`` when that starts a local instance."""
    if os.environ.get("RAY_USAGE_STATS_ENABLED", "0") != "1":
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    runtime_env = parallel_config.ray_runtime_env
    resources = {key: float(parallel_config.world_size)}
    try:
        ray.init(address=ray_address, runtime_env=runtime_env, resources=resources)
    except ValueError as e:
        if _JOINING_MARK not in str(e):
            raise
        ray.init(address=ray_address, runtime_env=runtime_env)
        return
    except Exception as e:
        raise RuntimeError(f"template platform: {COULD_NOT_START}: {type(e).__name__}: {e}") from e
    logger.info(
        "template platform: no Ray cluster to join (RAY_ADDRESS unset, no `ray start` on this "
        "host): started a local Ray instance declaring %s",
        resources,
    )


def _platform_ray_key() -> str:
    from vllm.platforms import current_platform

    return current_platform.ray_device_key


def with_resource_check(
    initialize: Callable[..., None], ray_key: Callable[[], str] = _platform_ray_key
) -> Callable[..., None]:
    """vLLM's ``initialize_ray_cluster``, after joining or starting Ray with the resource."""

    @functools.wraps(initialize)
    def initialize_ray_cluster(parallel_config: Any, *args: Any, **kwargs: Any) -> None:
        # (parallel_config, ray_address=None[, require_gpu_on_driver]) - 0.33 drops the last
        ray_address = kwargs.get("ray_address", args[0] if args else None)
        key = ray_key()
        if key and not ray.is_initialized():
            _join_or_start(parallel_config, ray_address, key)
        if (
            key
            and parallel_config.placement_group is None
            and ray.util.get_current_placement_group() is None
        ):
            problem = missing_resource(
                key, ray.cluster_resources().get(key, 0.0), parallel_config.world_size
            )
            if problem:
                raise RuntimeError(f"template platform: {problem}")
            available = ray.available_resources().get(key, 0.0)
            if available < parallel_config.world_size:
                logger.warning(
                    "template platform: the Ray cluster has %g of its '%s' free and this engine "
                    "needs %d: vLLM waits up to %d s for other jobs to release them",
                    available,
                    key,
                    parallel_config.world_size,
                    PG_WAIT_TIMEOUT,
                )
        initialize(parallel_config, *args, **kwargs)

    return initialize_ray_cluster

"""The device's platform: a plain vLLM ``Platform`` whose identity comes from ``identity.py``.

vLLM hook: the class the entry point (``platform_hooks.entry_point.register``) names for
``VLLM_TEMPLATE_DEVICE=<IDENTITY.device_type>``. This is the shape a vendor copies for a new
accelerator: it subclasses ``vllm.platforms.interface.Platform`` directly (not vLLM's
``CudaPlatform``), reports ``PlatformEnum.OOT`` and answers every question the engine asks
of a device itself, through ``torch.accelerator`` (current device, memory, dtypes: what
torch asks every accelerator's extension to provide) and, for what that API lacks (the
device's name and properties, seeding), torch's device module (``identity.torch_module()``).
It needs no compiled vLLM file: vLLM may be installed as pure Python
(``VLLM_TARGET_DEVICE=empty``), every kernel on the path is the plugin's or torch's.

Which hook serves what (docs/porting-guide.md; tiers in ``availability.HOOKS``):

- identity (first light): ``device_name``/``device_type`` (the torch device),
  ``dispatch_key`` (the key vLLM registers its ``torch.ops.vllm.*`` ops under),
  ``dist_backend``, ``device_control_env_var``, ``ray_device_key``: all from the identity
  table;
- device queries the engine makes while sizing memory and binding ranks (first light):
  ``get_device_name``/``uuid``/``capability``/``total_memory``, ``set_device``,
  ``manual_seed_all`` (seeding), ``get_current_memory_usage``, ``num_compute_units``,
  ``check_if_supports_dtype`` (the dtypes the device's runtime declares),
  ``is_pin_memory_available``; where an older torch's ``torch.accelerator`` lacks a memory
  call, the device module answers it; a property the device module does not report (a
  compute-capability version, UUID, multiprocessor count) is answered as vLLM's ``Platform``
  does without one; anything else vLLM asks (``synchronize``, ``mem_get_info``,
  ``graph_pool_handle``, streams) is forwarded by ``Platform.__getattr__`` to
  ``torch.<device_type>``;
- eager mode and the model runner (first light): with no kernel compiler in the table,
  :meth:`apply_config_platform_defaults` runs the engine eagerly on vLLM's V1 model runner,
  synchronously, without speculation (the runner's draft tokens need torch.cuda streams),
  and :meth:`register_triton_kernel_overrides` gives that runner its one per-step compiled
  kernel in torch (``reference_kernels/model_runner.py``); with no graph API, no graphs;
- kernels: ``import_kernels`` loads the folder's kernels instead of ``vllm._C``; the IR
  providers, custom ops, compiler, pass manager, graph wrapper and attention come from
  :class:`~.mixin.TemplatePlatformMixin`; the compiler's graph stage and vLLM's small helper
  compiles (``simple_compile_backend``) use Inductor, which generates code with the
  identity's ``kernel_compiler`` (speed);
- runtime: ``worker_cls`` -> ``worker.py`` (device, memory pool, sleep mode, model runner),
  ``get_device_communicator_cls`` -> vLLM's own ``DeviceCommunicatorBase`` in first light,
  ``communicator.py`` (its graph capture) with a graph API.

Proven by ``tests/devices/gpu/test_gpu_platform.py`` (any machine: the shape, the
identity and the first-light policy), ``tests/devices/gpu/test_gpu_first_light.py``
(first light on the device: tokens equal to transformers', weights and KV cache in the
device's memory; a plugin generated for the PrivateUse1 test device runs it in CI) and
the device tier's engine tests.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

import torch
from vllm.platforms.interface import DeviceCapability, Platform

from vllm_platform_template.devices.gpu.availability import (
    FOLDER,
    first_light_parts,
    graph_api,
    graph_api_problem,
)
from vllm_platform_template.devices.gpu.device import DEVICE
from vllm_platform_template.devices.gpu.identity import (
    ACCELERATOR_GRAPH,
    IDENTITY,
    DeviceIdentity,
    torch_module,
)
from vllm_platform_template.log import get_logger
from vllm_platform_template.platform_hooks.mixin import TemplatePlatformMixin
from vllm_platform_template.settings import options_of

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = get_logger(__name__)

STOCK_GPU_WORKER = "vllm.v1.worker.gpu_worker.Worker"
TEMPLATE_WORKER = "vllm_platform_template.devices.gpu.worker.TemplateGpuWorker"
COMMUNICATOR = "vllm_platform_template.devices.gpu.communicator.TemplateGpuCommunicator"
# The paged KV cache's block size when the user sets none (the paged-attention kernels'
# tile in this folder; vLLM's own default on its platforms too).
DEFAULT_BLOCK_SIZE = 16
# vLLM's choice of model runner (its documented switch)
V2_MODEL_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
# vllm/v1/worker/gpu_model_runner.py creates draft_token_ids_copy_stream at start
SPECULATION = "speculative decoding (vLLM's V1 runner copies draft tokens on torch.cuda streams)"


class TemplateGpuPlatform(TemplatePlatformMixin, Platform):
    """An out-of-tree platform built on ``Platform`` alone, for the device of ``identity.py``."""

    template_device = DEVICE
    stock_worker_cls = STOCK_GPU_WORKER
    template_worker_cls = TEMPLATE_WORKER

    device_name = IDENTITY.device_type
    device_type = IDENTITY.device_type
    dispatch_key = IDENTITY.dispatch_key
    dist_backend = IDENTITY.dist_backend or ""  # None: the entry point refuses the device
    ray_device_key = IDENTITY.ray_device_key
    device_control_env_var = IDENTITY.visible_devices_env
    # vLLM's small helper compiles (sampler, rotary caches): Inductor generates code with the
    # kernel compiler; without one, torch.compile runs them as traced, eagerly.
    simple_compile_backend = "inductor" if IDENTITY.kernel_compiler is not None else "eager"

    # --- device identity and queries --------------------------------------
    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return str(torch_module().get_device_name(device_id))

    @classmethod
    def get_device_uuid(cls, device_id: int = 0) -> str:
        uuid = getattr(torch_module().get_device_properties(device_id), "uuid", None)
        if uuid is None:
            return super().get_device_uuid(device_id)  # vLLM's answer: not implemented
        return str(uuid)

    @classmethod
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability | None:
        """The device module's ``(major, minor)`` capability, or None (vLLM's answer) for a
        device that reports none."""
        query = getattr(torch_module(), "get_device_capability", None)
        capability = query(device_id) if query is not None else None
        if not (isinstance(capability, tuple) and len(capability) == 2):
            return None
        major, minor = capability
        return DeviceCapability(major=major, minor=minor)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return accelerator_memory_info(device_id)[1]

    @classmethod
    def num_compute_units(cls, device_id: int = 0) -> int:
        properties = torch_module().get_device_properties(device_id)
        count = getattr(properties, "multi_processor_count", None)
        if count is None:
            return super().num_compute_units(device_id)  # vLLM's answer: not implemented
        return int(count)

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.accelerator.set_device_index(device)
        # Create the context now, not at the first kernel (pytorch/pytorch#155668).
        torch.zeros(1, device=device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch_module().manual_seed_all(seed)  # torch.accelerator has no seeding

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        accelerator_call("empty_cache")
        accelerator_call("reset_peak_memory_stats", device)
        return float(accelerator_call("max_memory_allocated", device))

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        """Pinned host memory comes from the device's runtime: torch's accelerator."""
        accelerator = torch.accelerator.current_accelerator()
        return accelerator is not None and accelerator.type == IDENTITY.device_type

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        """The dtypes the device's runtime declares (``torch.accelerator``'s capability)."""
        supported = accelerator_supported_dtypes()
        if supported is None:
            # the runtime cannot say: the device module's own bf16 answer, where it has one
            bf16_supported = getattr(torch_module(), "is_bf16_supported", None)
            if dtype == torch.bfloat16 and bf16_supported is not None and not bf16_supported():
                raise ValueError(
                    f"{cls.get_device_name()} does not support torch.bfloat16 (its device "
                    "module says so). Run with another --dtype."
                )
            return
        if dtype in supported:
            return
        raise ValueError(
            f"{cls.get_device_name()} does not support {dtype} (its runtime supports "
            f"{', '.join(sorted(str(d) for d in supported))}). Run with another --dtype."
        )

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        """vLLM's own communicator in first light and for ``torch.accelerator.Graph`` (the
        registry's ``oot_communicator_graph_capture`` gives its capture context); this
        folder's, with the device module's streams, for a graph class of that module."""
        if graph_api(IDENTITY) in (None, ACCELERATOR_GRAPH):
            return super().get_device_communicator_cls()
        if importlib.util.find_spec(COMMUNICATOR.rsplit(".", 1)[0]) is None:
            raise RuntimeError(
                f"identity.py names the graph class torch.{IDENTITY.torch_module}."
                f"{IDENTITY.graph_api}: capturing with it needs {FOLDER}/communicator.py "
                "(vLLM's capture context on the device module's streams; docs/porting-guide.md, "
                "'5. Communicator'), which this folder lacks: write it, or name "
                f"graph_api={ACCELERATOR_GRAPH!r} (torch.accelerator.Graph), for which vLLM's "
                "own communicator serves"
            )
        return COMMUNICATOR

    # --- first light: eager mode, V1 model runner ---------------------------
    @classmethod
    def apply_config_platform_defaults(cls, vllm_config: VllmConfig) -> None:
        """First light before vLLM derives anything from the mode (:func:`first_light_defaults`)."""
        first_light_defaults(vllm_config)
        super().apply_config_platform_defaults(vllm_config)

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        """vLLM's model runner launches a compiled kernel every step: in torch without a
        kernel compiler."""
        if IDENTITY.kernel_compiler is None:
            from vllm.triton_utils.dispatcher import register_kernels

            from vllm_platform_template.reference_kernels.model_runner import OVERRIDES

            register_kernels(OVERRIDES)

    # --- kernels and runtime ----------------------------------------------
    @classmethod
    def import_kernels(cls) -> None:
        """This folder's kernels (``device.load_libraries``), in place of vLLM's ``vllm._C``."""
        DEVICE.load_libraries()

    @classmethod
    def _update_device_config(cls, vllm_config: VllmConfig) -> None:
        cache_config = vllm_config.cache_config
        if cache_config.block_size is None:
            cache_config.block_size = DEFAULT_BLOCK_SIZE


def accelerator_call(name: str, *args: object) -> Any:
    """``torch.accelerator.<name>(*args)``, or ``torch.<module>.<name>`` where this torch's
    accelerator API lacks it (torch 2.13 has them all; older ones not every memory call)."""
    function = getattr(torch.accelerator, name, None) or getattr(torch_module(), name)
    return function(*args)


def accelerator_memory_info(device_id: int) -> tuple[int, int]:
    """``(free, total)`` bytes of the device's memory, from its runtime."""
    if hasattr(torch.accelerator, "get_memory_info"):
        free, total = torch.accelerator.get_memory_info(device_id)
    else:
        free, total = torch_module().mem_get_info(device_id)
    return int(free), int(total)


def accelerator_supported_dtypes() -> set[torch.dtype] | None:
    """The dtypes the current device's runtime supports (None: this torch cannot say).

    ``torch.accelerator.get_device_capability`` asks the device guard; a torch whose
    API has no such call, or whose device guard does not answer it (torch 2.11's
    in-tree guards: "Backend doesn't support getting device capabilities"), cannot say.
    """
    query = getattr(torch.accelerator, "get_device_capability", None)
    if query is None:
        return None
    try:
        return set(query()["supported_dtypes"])
    except (RuntimeError, NotImplementedError):
        return None


def first_light_defaults(
    vllm_config: VllmConfig,
    identity: DeviceIdentity = IDENTITY,
    environ: MutableMapping[str, str] = os.environ,
) -> None:
    """The config of an engine on a device whose identity leaves speed APIs out.

    Without a kernel compiler the engine runs on vLLM's V1 model runner (V2 launches
    vLLM's own compiled kernels), scheduling synchronously, eagerly unless a graph API
    holds whole decode steps (FULL graphs), and uncompiled (Inductor and vLLM's JIT
    warm-up generate code with it) unless the user asks for the compiler's
    ``fusion_only`` stage, which generates none: the plugin's passes and vLLM IR's
    lowering place the device's kernels and the pieces run as FX graphs. What the user
    asked for explicitly and cannot run is refused with what runs instead.
    """
    from vllm.config import CompilationMode, CUDAGraphMode

    cc = vllm_config.compilation_config
    compile_requested = cc.mode not in (None, CompilationMode.NONE)
    graphs_requested = cc.cudagraph_mode not in (None, CUDAGraphMode.NONE)
    graphs = graph_api(identity)
    if graphs is None and identity.graph_api is not None:
        why = graph_api_problem(identity)
        logger.warning_once(
            f"{FOLDER}: identity.py names the graph API {identity.graph_api!r}, but {why}: "
            "every batch runs eagerly (cudagraph_mode NONE). Register the device's graphs in "
            "its torch extension (docs/porting-guide.md, '13. Graph capture') or name none."
        )
    if identity.kernel_compiler is None:
        fusion_only = options_of(vllm_config).compile_stage == "fusion_only"
        _refuse_requested(compile_requested and not fusion_only, "compilation", identity)
        chosen = environ.get(V2_MODEL_RUNNER_ENV)
        _refuse_requested(chosen not in (None, "0"), f"{V2_MODEL_RUNNER_ENV}={chosen}", identity)
        compiled = compile_requested and fusion_only
        if vllm_config.model_config is not None and graphs is None and not compiled:
            vllm_config.model_config.enforce_eager = True  # (vLLM: no compilation either)
        if not compiled:
            cc.mode = CompilationMode.NONE
        vllm_config.kernel_config.enable_jit_warmup = False
        # vLLM's V1 model runner overlaps its steps on torch.cuda streams only
        vllm_config.scheduler_config.async_scheduling = False
        # (like the async scheduling above: the V1 runner's side streams are torch.cuda's)
        speculation = getattr(vllm_config, "speculative_config", None) is not None
        _refuse_requested(speculation, SPECULATION, identity)
        if chosen is None:
            environ[V2_MODEL_RUNNER_ENV] = "0"  # every process of the engine starts from here
            for line in first_light_parts(identity):
                logger.info("%s: %s", FOLDER, line)
            eager = vllm_config.model_config is not None and vllm_config.model_config.enforce_eager
            steps = {
                (False, False): "eager",
                (False, True): "no compilation, FULL decode graphs where the attention allows",
                (True, False): "the compiler's fusion_only stage, no graphs",
                (True, True): "the compiler's fusion_only stage, FULL decode graphs where the "
                "attention allows",
            }[compiled, graphs is not None and not eager]
            logger.info(
                "%s: first light: %s, V1 model runner, synchronous scheduling", FOLDER, steps
            )
    if identity.graph_api is None:
        _refuse_requested(graphs_requested, "graph capture", identity)
    if graphs is None:
        cc.cudagraph_mode = CUDAGraphMode.NONE


def _refuse_requested(requested: bool, what: str, identity: DeviceIdentity) -> None:
    if requested:
        raise ValueError(
            f"{what} was asked for, but {FOLDER} runs in first light on {identity.device_type}: "
            + "; ".join(first_light_parts(identity))
        )

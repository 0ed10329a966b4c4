"""What every template platform adds on top of the vLLM platform it extends.

vLLM hooks served here (``vllm/platforms/interface.py``): the compiler
(``get_compile_backend``), the pass manager (``get_pass_manager_cls``; it
travels under vLLM's default ``pass_key``, ``settings.INDUCTOR_POST_PASS_KEY``),
the static-graph wrapper (``support_static_graph_mode``,
``get_static_graph_wrapper_cls``), the graph split at attention
(``opaque_attention_op``), the attention backend (``get_attn_backend_cls``),
the IR kernels and their priorities (``import_ir_kernels``,
``get_default_ir_op_priority``), the check of ``VLLM_*`` variables
(``validate_environ``: the plugin's own are known) and the config hooks
(``apply_config_platform_defaults``, ``check_and_update_config``: the worker
class, compilation, graphs, the compile cache), which leave the decisions to
``policy`` (and the trusted cache to ``compile_cache``) and read every device
fact from the platform's ``template_device`` (``device.py``).

The concrete platforms, one per device folder, combine this mixin with vLLM's
own platform class for the backend (vLLM's ``CpuPlatform`` for the CPU
reference backend, the plain ``Platform`` for the GPU backend, as a new
accelerator has no vLLM platform to extend, vLLM's ``XPUPlatform`` for the
reserved XPU backend) and report ``PlatformEnum.OOT``; see
``devices/<name>/platform.py``.
"""

from __future__ import annotations

import copy
import importlib
import os
from typing import TYPE_CHECKING, ClassVar

from vllm.platforms.interface import PlatformEnum

from vllm_platform_template.device import kernel_table
from vllm_platform_template.log import get_logger
from vllm_platform_template.platform_hooks import policy
from vllm_platform_template.platform_hooks.entry_point import (
    TemplatePlatformError,
    installed_vllm,
    vllm_version_problem,
)
from vllm_platform_template.quantization import (
    SUPPORTED_QUANTIZATION,
    unsupported_quantization_message,
)
from vllm_platform_template.settings import (
    COMPILER_QUALNAME,
    ENV_PREFIX,
    ENVIRONMENT_VARIABLES,
    GRAPH_WRAPPER_QUALNAME,
    PACKAGE,
    PASS_MANAGER_QUALNAME,
    TemplateOptions,
    options_of,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.config.kernel import IrOpPriorityConfig
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

    from vllm_platform_template.device import TemplateDevice

logger = get_logger(__name__)
# vLLM's variable for how it starts its engine and worker processes (fork or spawn).
START_METHOD_ENV = "VLLM_WORKER_MULTIPROC_METHOD"
# vLLM's connectors that offload the KV cache to host memory (``kv_offloading_size`` picks
# one); their workers copy blocks only on the platforms vLLM calls CUDA-alike or XPU
# (vllm/v1/kv_offload/cpu/spec.py, vllm/v1/simple_kv_offload/worker.py: torch.cuda streams)
OFFLOADING_CONNECTORS = ("OffloadingConnector", "SimpleCPUOffloadConnector")

_version_problem = vllm_version_problem(installed_vllm())
if _version_problem is not None:
    raise TemplatePlatformError(_version_problem)


class TemplatePlatformMixin:
    """Hooks shared by every template platform (one per device folder)."""

    _enum = PlatformEnum.OOT
    template_device: ClassVar[TemplateDevice]
    """The device object of the platform's folder (``devices/<name>``)."""
    # the base platform's worker, and the template's subclass that replaces it
    stock_worker_cls: ClassVar[str]
    template_worker_cls: ClassVar[str]

    # What quantized checkpoints may ask for (vLLM checks it when it reads the config).
    supported_quantization: ClassVar[list[str]] = SUPPORTED_QUANTIZATION

    @classmethod
    def verify_quantization(cls, quant: str) -> None:
        """Refuse a method the template's kernels do not run, saying which ones they do.

        vLLM's own CPU and XPU platforms list none or their own; the template's layers
        run W8A8 INT8 (``quantization/int8_linear.py``) on a device whose kernel table
        has the kernel.
        """
        device = cls.template_device
        if quant not in SUPPORTED_QUANTIZATION:
            raise ValueError(unsupported_quantization_message(quant, device.name))
        table = kernel_table(device.torch_device_type)
        if table is None or table.w8a8_int8_linear is None:
            raise ValueError(
                f"{quant} quantization: the template's {device.name} device has no W8A8 "
                "INT8 kernel (its kernel table's w8a8_int8_linear); use an unquantized model"
            )

    # --- compilation -----------------------------------------------------
    @classmethod
    def get_compile_backend(cls) -> str:
        """The ``CompilerInterface`` vLLM instantiates under VLLM_COMPILE."""
        return COMPILER_QUALNAME

    @classmethod
    def get_pass_manager_cls(cls) -> str:
        return PASS_MANAGER_QUALNAME

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        """The compiled pieces run as static graphs (``graph_wrapper``)."""
        return True

    @classmethod
    def get_static_graph_wrapper_cls(cls) -> str:
        return GRAPH_WRAPPER_QUALNAME

    @classmethod
    def opaque_attention_op(cls) -> bool:
        """Attention is an opaque ``torch.ops.vllm`` call: the graph is split there."""
        return True

    # --- attention -------------------------------------------------------
    @classmethod
    def get_attn_backend_cls(
        cls,
        selected_backend: AttentionBackendEnum | None,
        attn_selector_config: AttentionSelectorConfig,
        num_heads: int | None = None,
    ) -> str:
        """TEMPLATE_ATTN for every layer it can serve, validated here because vLLM's
        selector leaves validation to the platform. An explicitly requested other
        backend (``--attention-backend CPU_ATTN``) goes to the base platform."""
        from vllm_platform_template.attention.registration import attention_backend_qualname
        from vllm_platform_template.settings import ATTENTION_BACKEND_NAME

        if selected_backend is not None and selected_backend.name != ATTENTION_BACKEND_NAME:
            logger.info_once(
                "template platform: attention backend %s requested instead of %s",
                selected_backend.name,
                ATTENTION_BACKEND_NAME,
            )
            return super().get_attn_backend_cls(  # type: ignore[misc]
                selected_backend, attn_selector_config, num_heads
            )
        capability = cls.get_device_capability()  # type: ignore[attr-defined]
        return attention_backend_qualname(attn_selector_config, capability)

    # --- environment -----------------------------------------------------
    @classmethod
    def validate_environ(cls, hard_fail: bool) -> None:
        """vLLM's check of ``VLLM_*`` variables, knowing the plugin's own.

        ``Platform.validate_environ`` flags every ``VLLM_*`` variable vLLM's
        ``envs.py`` does not define ("Unknown vLLM environment variable
        detected"), ``VLLM_TEMPLATE_DEVICE`` included, the one every template run
        sets. The platform knows its plugin's variables
        (``settings.ENVIRONMENT_VARIABLES``); any other ``VLLM_*`` name is flagged
        as vLLM flags it (a warning, or ``ValueError`` with ``hard_fail``), and an
        unknown ``VLLM_TEMPLATE_*`` name says which ones the plugin reads.
        """
        from vllm import envs

        known = {**ENVIRONMENT_VARIABLES, **cls.template_device.environment_variables}
        for name in os.environ:
            if not name.startswith("VLLM_") or name in envs.environment_variables:
                continue
            if name in known:
                continue
            hint = ""
            if name.startswith(ENV_PREFIX):
                hint = f" (vllm-platform-template reads {', '.join(known)})"
            if hard_fail:
                raise ValueError(f"Unknown vLLM environment variable detected: {name}{hint}")
            logger.warning("Unknown vLLM environment variable detected: %s%s", name, hint)

    # --- config ----------------------------------------------------------
    @classmethod
    def template_options(cls, vllm_config: VllmConfig) -> TemplateOptions:
        return options_of(vllm_config)

    @classmethod
    def apply_config_platform_defaults(cls, vllm_config: VllmConfig) -> None:
        """Defaults vLLM derives from the mode later: custom ops base, IR torch wrap."""
        super().apply_config_platform_defaults(vllm_config)  # type: ignore[misc]
        options = cls.template_options(vllm_config)  # fail early on bad options
        cc = vllm_config.compilation_config
        if options.model_impl != "vllm":
            # the plugin's own device-specific model code (settings.MODEL_IMPLS: where the
            # plugin has it, models/ decides what its classes replace)
            importlib.import_module(f"{PACKAGE}.models").use_model_code(vllm_config)
        mode = policy.effective_mode(cc.mode, int(vllm_config.optimization_level))
        if cc.ir_enable_torch_wrap is None:
            cc.ir_enable_torch_wrap = policy.ir_torch_wrap(mode)
        if not any(base in cc.custom_ops for base in ("all", "none")):
            cc.custom_ops.append(policy.default_custom_ops_base(mode))
        cc.custom_ops.extend(policy.custom_ops_for_road(options.kernel_road, cc.custom_ops))
        cls._apply_graph_defaults(vllm_config, mode)

    @classmethod
    def _apply_graph_defaults(cls, vllm_config: VllmConfig, mode: int) -> None:
        """Default graph mode and sizes, set before vLLM derives capture sizes from them."""
        from vllm.config import CUDAGraphMode

        cc = vllm_config.compilation_config
        device = cls.template_device
        if cc.cudagraph_mode is None and device.default_graph_mode is not None:
            cc.cudagraph_mode = CUDAGraphMode[device.default_graph_mode]
        if cc.cudagraph_capture_sizes is None and cc.max_cudagraph_capture_size is None:
            cc.max_cudagraph_capture_size = device.max_capture_size(
                vllm_config.scheduler_config.max_num_seqs,
                vllm_config.uniform_decode_query_len,
            )

    @classmethod
    def check_and_update_config(cls, vllm_config: VllmConfig) -> None:
        cc = vllm_config.compilation_config
        requested_mode = int(cc.mode) if cc.mode is not None else policy.MODE_NONE
        requested_backend = cc.backend
        capture_sizes = list(cc.cudagraph_capture_sizes or [])
        cls._check_lora(vllm_config)
        cls._check_kv_offloading(vllm_config)
        super().check_and_update_config(vllm_config)  # type: ignore[misc]
        cls._choose_start_method()
        cls._update_worker(vllm_config)
        cls._update_device_config(vllm_config)
        cls._update_compilation(vllm_config, requested_mode, requested_backend)
        cls._update_graphs(vllm_config, capture_sizes)
        cls._check_ir_op_priority(vllm_config)
        cls._update_ray_runtime_env(vllm_config)

    @classmethod
    def get_punica_wrapper(cls) -> str:
        """The device folder's punica wrapper (``TemplateDevice.punica_wrapper``)."""
        wrapper = cls.template_device.punica_wrapper
        if wrapper is None:
            raise NotImplementedError(cls._no_lora_reason())
        return wrapper

    @classmethod
    def _no_lora_reason(cls) -> str:
        name = cls.template_device.name
        return (
            f"LoRA is not supported on the {name} platform yet: its device folder "
            f"(devices/{name}/device.py) names no punica_wrapper, the class vLLM's LoRA layers "
            "call (Platform.get_punica_wrapper; docs/porting-guide.md, 'LoRA'); start the "
            "engine without enable_lora"
        )

    @classmethod
    def _check_lora(cls, vllm_config: VllmConfig) -> None:
        """``enable_lora`` without a punica wrapper: refused now, not at engine start."""
        if vllm_config.lora_config is not None and cls.template_device.punica_wrapper is None:
            raise ValueError(cls._no_lora_reason())

    @classmethod
    def _check_kv_offloading(cls, vllm_config: VllmConfig) -> None:
        """KV-cache offloading where vLLM's offloading worker cannot run: refused now, not
        when the worker dies at engine start (as it does on stock vLLM CPU)."""
        cache, transfer = vllm_config.cache_config, vllm_config.kv_transfer_config
        asked = cache.kv_offloading_size is not None and cache.kv_offloading_backend == "native"
        asked = asked or (transfer is not None and transfer.kv_connector in OFFLOADING_CONNECTORS)
        # (vLLM's own test: Platform.is_cuda_alike() or is_xpu(), instance methods)
        if asked and cls._enum not in (PlatformEnum.CUDA, PlatformEnum.ROCM, PlatformEnum.XPU):
            raise ValueError(
                "KV-cache offloading to host memory (kv_offloading_size, or one of vLLM's "
                f"{', '.join(OFFLOADING_CONNECTORS)}) was asked for, but vLLM's offloading "
                "worker copies KV blocks only on CUDA-alike and XPU platforms "
                f"(vllm/v1/kv_offload/cpu/spec.py) and {cls.__name__} is neither: start the "
                "engine without it"
            )

    @classmethod
    def _choose_start_method(cls) -> None:
        """vLLM starts the engine and worker processes by spawning, not forking.

        vLLM forks by default (``VLLM_WORKER_MULTIPROC_METHOD``) unless a device runtime is already
        initialized; a process that has run torch on the CPU has started OpenMP threads,
        and a forked child of it deadlocks in libgomp at its first parallel region (the
        first-light demo did, in ``InputBatch.__init__``, after writing its model). vLLM's
        CPU and XPU platforms set spawn for that reason; every template platform does.
        A method the user set is kept.
        """
        method = os.environ.get(START_METHOD_ENV)
        if method is None:
            os.environ[START_METHOD_ENV] = "spawn"
        elif method != "spawn":
            logger.warning(
                "template platform: %s=%s; a forked engine deadlocks when this process has "
                "started OpenMP threads (torch on the CPU): unset it to spawn",
                START_METHOD_ENV,
                method,
            )

    @classmethod
    def _update_worker(cls, vllm_config: VllmConfig) -> None:
        """Point ``parallel_config.worker_cls`` at the platform's worker.

        Only vLLM's own choice (``auto`` or the base platform's worker) is
        replaced; a worker class the user asked for is kept.
        """
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls in ("auto", cls.stock_worker_cls):
            parallel_config.worker_cls = cls.template_worker_cls

    @classmethod
    def _update_device_config(cls, vllm_config: VllmConfig) -> None:
        """Device-specific corrections after the base platform's ``check_and_update_config``."""

    @classmethod
    def _update_ray_runtime_env(cls, vllm_config: VllmConfig) -> None:
        """Ray workers on every host select this platform (``policy.ray_worker_env_vars``).

        vLLM hook: ``parallel_config.ray_runtime_env``, which vLLM's Ray executors pass
        to ``ray.init`` and to each worker actor.
        """
        parallel_config = vllm_config.parallel_config
        if not parallel_config.use_ray:
            return
        try:
            from ray.runtime_env import RuntimeEnv
        except ImportError:
            return  # vLLM's Ray executor says how to install Ray
        requested = parallel_config.ray_runtime_env
        runtime_env = copy.deepcopy(requested) if requested is not None else RuntimeEnv()
        runtime_env["env_vars"] = policy.ray_worker_env_vars(
            os.environ, dict(runtime_env.get("env_vars") or {})
        )
        parallel_config.ray_runtime_env = runtime_env

    @classmethod
    def _update_compilation(
        cls, vllm_config: VllmConfig, requested_mode: int, requested_backend: str
    ) -> None:
        from vllm.config import CompilationMode

        cc = vllm_config.compilation_config
        decision = policy.resolve_compilation(
            requested_mode,
            requested_backend,
            cls.get_compile_backend(),
            lora_enabled=vllm_config.lora_config is not None,
        )
        if decision.note:
            logger.info("template platform: %s", decision.note)
        cc.mode = CompilationMode(decision.mode)
        cc.backend = decision.backend
        cc.ir_enable_torch_wrap = policy.ir_torch_wrap(decision.mode)

        flags = {name: getattr(cc.pass_config, name, None) for name in policy.VLLM_FUSION_FLAGS}
        for name in policy.enabled_unsupported_fusions(flags):
            setattr(cc.pass_config, name, False)
            logger.info(
                "template platform: pass_config.%s turned off: it is one of vLLM's CUDA/ROCm "
                "fusion passes, which the template pass manager does not run",
                name,
            )
        if policy.needs_compile_sizes(decision.mode, cc.compile_sizes):
            cc.compile_sizes = []
        if (
            decision.mode == policy.MODE_VLLM_COMPILE
            and decision.backend == cls.get_compile_backend()
        ):
            cls._key_compile_cache(vllm_config)
        if decision.mode == policy.MODE_VLLM_COMPILE:
            cls._check_compile_cache(vllm_config)

    @classmethod
    def _check_compile_cache(cls, vllm_config: VllmConfig) -> None:
        """Use only a trusted, writable compile cache (see ``compile_cache``)."""
        from vllm_platform_template.platform_hooks import compile_cache

        message = compile_cache.use_trusted_cache(vllm_config.compilation_config)
        if message:
            logger.warning("template platform: %s", message)

    @classmethod
    def _update_graphs(cls, vllm_config: VllmConfig, capture_sizes: list[int]) -> None:
        """The graph mode ``policy.resolve_graph_mode`` decides, with the sizes vLLM derived
        (the base platform may have cleared them)."""
        from vllm.config import CUDAGraphMode

        from vllm_platform_template.attention.kernel_choice import engine_attention_kernels

        cc = vllm_config.compilation_config
        device = cls.template_device
        requested = cc.cudagraph_mode.name if cc.cudagraph_mode is not None else "NONE"
        # Resolved only where it decides anything: a device whose graphs hold whole steps.
        kernels = (
            engine_attention_kernels(vllm_config, device.torch_device_type)
            if device.records_whole_steps
            else None
        )
        decision = policy.resolve_graph_mode(
            requested,
            enforce_eager=bool(
                vllm_config.model_config is not None and vllm_config.model_config.enforce_eager
            ),
            pieces=int(cc.mode) == policy.MODE_VLLM_COMPILE,
            device_full_graphs=device.records_whole_steps,
            attention_full_graphs=kernels is not None and kernels.full_graphs,
            # Asked only where it matters (vLLM logs its choice of runner when asked).
            # V2 records them with torch.<module>.<graph_api>; V1 through the platform's
            # FULL wrapper, with torch.accelerator.Graph only.
            runner_records_steps=device.records_whole_steps
            and device.whole_steps_on_v1 != bool(vllm_config.use_v2_model_runner),
        )
        if decision.why:
            logger.info(
                "template platform: cudagraph_mode %s -> %s (%s)",
                requested,
                decision.mode,
                "; ".join(decision.why),
            )
        if decision.mode == "NONE" or not capture_sizes:
            cc.cudagraph_mode = CUDAGraphMode.NONE
            cc.cudagraph_capture_sizes = []
            cc.max_cudagraph_capture_size = 0
            return
        cc.cudagraph_mode = CUDAGraphMode[decision.mode]
        cc.cudagraph_capture_sizes = sorted(set(capture_sizes))
        cc.max_cudagraph_capture_size = cc.cudagraph_capture_sizes[-1]
        compile_sizes = [s for s in cc.compile_sizes or [] if isinstance(s, int)]
        problems = policy.capture_size_problems(cc.cudagraph_capture_sizes, compile_sizes)
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def _key_compile_cache(cls, vllm_config: VllmConfig) -> None:
        """Put stage, plugin version and pass sources into vLLM's config hash.

        vLLM's AOT compile cache is keyed on ``vllm_config.compute_hash()``
        only; without this a graph-stage run would load pieces cached by a
        fusion-only run. ``additional_config`` is part of that hash.
        """
        from vllm_platform_template.compiler.cache_key import compile_cache_key
        from vllm_platform_template.settings import COMPILE_KEY_CONFIG_KEY

        if not isinstance(vllm_config.additional_config, dict):
            raise ValueError(
                "the template platform needs additional_config to be a dict (JSON object)"
            )
        stage = cls.template_options(vllm_config).compile_stage
        vllm_config.additional_config[COMPILE_KEY_CONFIG_KEY] = compile_cache_key(stage)

    # --- kernels ---------------------------------------------------------
    @classmethod
    def import_ir_kernels(cls) -> None:
        """Import vLLM's IR providers and the template's own (``ir_impls``)."""
        super().import_ir_kernels()  # type: ignore[misc]
        import vllm_platform_template.ir_impls  # noqa: F401

    @classmethod
    def get_default_ir_op_priority(cls, vllm_config: VllmConfig) -> IrOpPriorityConfig:
        """Device kernels first, except where Inductor codegen beats them (``policy``)."""
        from vllm.config.kernel import IrOpPriorityConfig
        from vllm.ir.op import IrOp

        cc = vllm_config.compilation_config
        mode = int(cc.mode) if cc.mode is not None else policy.MODE_NONE
        options = cls.template_options(vllm_config)
        # vLLM's registry names the ops; its config has a field per op.
        ops = [op for op in IrOp.registry if op in IrOpPriorityConfig.__dataclass_fields__]
        device = cls.template_device
        priorities = policy.default_ir_op_priority(
            device.ir_provider,
            device.ir_ops,
            device.native_under_inductor,
            mode,
            options.compile_stage,
            ops,
            options.kernel_road,
        )
        return IrOpPriorityConfig(**priorities)

    @classmethod
    def _check_ir_op_priority(cls, vllm_config: VllmConfig) -> None:
        """Reject unknown provider names with the list of registered ones."""
        from dataclasses import asdict

        from vllm.ir.op import IrOp

        cls.import_ir_kernels()
        priorities = asdict(vllm_config.kernel_config.ir_op_priority)
        registered = {name: list(op.impls) for name, op in IrOp.registry.items()}
        problems = policy.unknown_providers(priorities, registered)
        if problems:
            raise ValueError("; ".join(problems) + " (set with --ir-op-priority.<op>=...)")

"""Config policy of the template platforms, as small pure functions.

vLLM hooks: ``Platform.apply_config_platform_defaults`` (before vLLM derives
defaults from the compilation mode) and ``Platform.check_and_update_config``
(after). Each decision is a function of plain values so it can be unit-tested
on CPU without building a ``VllmConfig`` - the CUDA platform's decisions too.
The platform classes only read the config, call these, and write the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# vLLM's CompilationMode values, repeated here so this module needs no vLLM.
MODE_NONE = 0
MODE_STOCK_TORCH_COMPILE = 1
MODE_DYNAMO_TRACE_ONCE = 2
MODE_VLLM_COMPILE = 3

STOCK_BACKENDS = ("inductor", "eager")

# pass_config flags of vLLM's own fusion passes. The template platform runs its
# own pass manager, which implements none of them: vLLM imports those passes
# only on CUDA/ROCm/XPU, and on an out-of-tree platform an enabled flag makes
# vLLM's PostGradPassManager fail with ``NameError: RMSNormQuantFusionPass``.
VLLM_FUSION_FLAGS = (
    "fuse_norm_quant",
    "fuse_act_quant",
    "fuse_attn_quant",
    "fuse_allreduce_rms",
    "enable_qk_norm_rope_fusion",
    "fuse_rope_kvcache_cat_mla",
    "fuse_act_padding",
    "fuse_mla_dual_rms_norm",
    "fuse_rope_kvcache",
    "fuse_qk_norm_rope_kvcache",
)


def effective_mode(mode: int | None, optimization_level: int) -> int:
    """The compilation mode vLLM will pick: an explicit one, else VLLM_COMPILE above -O0."""
    if mode is not None:
        return int(mode)
    return MODE_VLLM_COMPILE if optimization_level > 0 else MODE_NONE


def default_custom_ops_base(mode: int) -> str:
    """``"all"`` or ``"none"``: whether vLLM CustomOps dispatch to ``forward_oot``.

    Under VLLM_COMPILE (both stages) the layers stay in plain torch (``"none"``)
    so that the template's fusion passes see the patterns and replace them with
    device kernels, and Inductor (graph stage) fuses the rest. In eager mode no
    pass runs, so every CustomOp goes to the device kernels of its
    ``forward_oot`` (``"all"``).
    """
    return "none" if mode == MODE_VLLM_COMPILE else "all"


def ir_torch_wrap(mode: int) -> bool:
    """Whether vLLM IR ops stay ``torch.ops.vllm_ir.*`` nodes in traced graphs.

    Under VLLM_COMPILE the template compiler needs them visible: its fusion
    passes match IR ops and its lowering pass picks providers per piece. In
    eager mode the wrap only adds dispatcher overhead.
    """
    return mode == MODE_VLLM_COMPILE


@dataclass(frozen=True)
class CompileDecision:
    mode: int
    backend: str
    note: str | None = None  # what changed and why, for the log


def resolve_compilation(
    requested_mode: int,
    requested_backend: str,
    template_backend: str,
    lora_enabled: bool,
) -> CompileDecision:
    """Mode and backend for the template platform.

    ``requested_*`` are the values before ``CpuPlatform.check_and_update_config``
    rewrote them (it turns VLLM_COMPILE into DYNAMO_TRACE_ONCE + plain Inductor,
    which would never call a custom compiler).
    """
    if lora_enabled and requested_mode != MODE_NONE:
        return CompileDecision(
            MODE_NONE, requested_backend, "LoRA is enabled: compilation off (as stock vLLM CPU)"
        )
    if requested_mode == MODE_VLLM_COMPILE:
        if requested_backend in STOCK_BACKENDS:
            return CompileDecision(
                MODE_VLLM_COMPILE,
                requested_backend,
                f"compilation backend {requested_backend!r} was set explicitly: the template "
                "compiler and its fusion passes are bypassed",
            )
        return CompileDecision(MODE_VLLM_COMPILE, template_backend)
    if requested_mode in (MODE_STOCK_TORCH_COMPILE, MODE_DYNAMO_TRACE_ONCE):
        # These modes hand `backend` to torch.compile directly; a CompilerInterface
        # is not a Dynamo backend.
        backend = requested_backend if requested_backend in STOCK_BACKENDS else "inductor"
        return CompileDecision(requested_mode, backend)
    return CompileDecision(requested_mode, requested_backend)


def enabled_unsupported_fusions(pass_flags: Mapping[str, bool | None]) -> list[str]:
    """vLLM fusion flags that are on but that the template pass manager cannot run."""
    return [name for name in VLLM_FUSION_FLAGS if pass_flags.get(name)]


def needs_compile_sizes(mode: int, compile_sizes: Iterable[int] | None) -> bool:
    """True when VLLM_COMPILE would run with ``compile_sizes=None``.

    vLLM only fills ``compile_sizes`` on static-graph platforms; ``None`` makes
    ``PiecewiseBackend`` find no range for any shape (``AssertionError: Shape:
    2048 out of considered ranges``).
    """
    return mode == MODE_VLLM_COMPILE and compile_sizes is None


# Fusion passes of the template compiler, by stage (names of TemplatePassManager's
# passes). The SiLU-and-multiply fusion runs only without code generation: under
# Inductor the same three ops already become one generated loop, and an opaque
# kernel call would block Inductor from fusing it with its neighbours.
FUSION_PASSES: dict[str, tuple[str, ...]] = {
    "fusion_only": ("add_rms_norm", "silu_and_mul"),
    "graph": ("add_rms_norm",),
}


def fusion_passes(stage: str) -> tuple[str, ...]:
    """The template fusion passes that run in ``stage``."""
    return FUSION_PASSES[stage]

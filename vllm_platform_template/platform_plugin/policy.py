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


def needs_compile_sizes(mode: int, compile_sizes: Iterable[object] | None) -> bool:
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


# Default vLLM IR provider priorities, per device and compilation regime. Each
# choice is backed by `vllm-template bench-ops` on the reference machines; the
# figures are in docs/performance.md ("IR provider priorities").
IR_OPS = ("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse")
DEVICE_PROVIDER = {"cpu": "template_cpu", "cuda": "template_triton", "xpu": "template_ipex"}
# Ops whose native form, code-generated and fused by Inductor, beat the device
# kernel in the graph stage (measured per device).
NATIVE_UNDER_INDUCTOR: dict[str, tuple[str, ...]] = {
    # CPU: vLLM's C++ RMSNorm kernels beat Inductor's generated code at every
    # measured shape; the sparse GELU reduction is faster fused by Inductor.
    "cpu": ("gelu_and_mul_sparse",),
    # CUDA: Inductor's generated kernels sit close to copy bandwidth for all three.
    "cuda": ("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"),
    "xpu": IR_OPS,
}


def default_ir_op_priority(device: str, mode: int, compile_stage: str) -> dict[str, list[str]]:
    """Provider priority per IR op: device kernels first unless Inductor codegen wins.

    In eager mode and in the fusion-only stage nothing generates code, so the
    device kernel always goes first. In the graph stage an op stays native when
    Inductor's fusion beats the kernel on this device. ``native`` always ends
    the list so every call has a provider.
    """
    provider = DEVICE_PROVIDER[device]
    graph_codegen = mode == MODE_VLLM_COMPILE and compile_stage == "graph"
    priorities = {}
    for op in IR_OPS:
        keep_native = graph_codegen and op in NATIVE_UNDER_INDUCTOR[device]
        priorities[op] = ["native"] if keep_native else [provider, "native"]
    return priorities


def unknown_providers(
    priorities: Mapping[str, Iterable[str] | None], registered: Mapping[str, Iterable[str]]
) -> list[str]:
    """Messages for provider names in ``priorities`` that are not registered."""
    problems = []
    for op, names in priorities.items():
        known = sorted(registered.get(op, ()))
        for name in names or ():
            if name not in known:
                problems.append(
                    f"unknown provider {name!r} for vLLM IR op {op!r}; registered providers: "
                    f"{', '.join(known)}"
                )
    return problems


# Piecewise graphs. The CPU emulation saves no launch time, so its default
# sizes stay few and small (capture cost at start-up, coverage of vLLM's padding
# and dispatch for decode batches); a device with real graphs uses vLLM's defaults.
CPU_MAX_CAPTURE_SIZE = 16


def default_graph_mode(device: str) -> str | None:
    """``cudagraph_mode`` when the user sets none (None: vLLM's default for the level).

    The CPU emulation costs a copy per piece and saves nothing, so the CPU
    reference backend runs without graphs unless asked (``cudagraph_mode
    PIECEWISE``, which the tests and the graph docs use); a device with real
    graphs keeps vLLM's default.
    """
    return "NONE" if device == "cpu" else None


def default_max_capture_size(device: str, max_num_seqs: int, decode_query_len: int) -> int | None:
    """Largest graph size when the user set neither sizes nor a maximum (None: vLLM's)."""
    if device == "cpu":
        return max(1, min(CPU_MAX_CAPTURE_SIZE, 2 * max_num_seqs * decode_query_len))
    return None


def graphs_enabled(mode: int, enforce_eager: bool, requested_piecewise: bool) -> bool:
    """Piecewise graphs need VLLM_COMPILE (the split pieces) and no enforce_eager."""
    return mode == MODE_VLLM_COMPILE and not enforce_eager and requested_piecewise


def capture_size_problems(capture_sizes: Iterable[int], compile_sizes: Iterable[int]) -> list[str]:
    """Compile sizes that vLLM would pad to another graph size (it rejects those later)."""
    sizes = sorted(set(capture_sizes))
    if not sizes:
        return []
    problems = []
    for size in compile_sizes:
        if size <= sizes[-1] and size not in sizes:
            padded = next(s for s in sizes if s >= size)
            problems.append(
                f"compile size {size} is not a graph capture size (it would be padded to "
                f"{padded}); add it to cudagraph_capture_sizes or remove it from compile_sizes"
            )
    return problems


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

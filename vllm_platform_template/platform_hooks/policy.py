"""Config policy of the template platforms, as small pure functions.

vLLM hooks: ``Platform.apply_config_platform_defaults`` (before vLLM derives
defaults from the compilation mode) and ``Platform.check_and_update_config``
(after). Each decision is a function of plain values so it can be unit-tested
on CPU without building a ``VllmConfig`` - every device folder's decisions too.
The platform classes only read the config, call these, and write the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vllm_platform_template.settings import ENV_PREFIX

# vLLM's CompilationMode values, repeated here so this module needs no vLLM.
MODE_NONE = 0
MODE_STOCK_TORCH_COMPILE = 1
MODE_DYNAMO_TRACE_ONCE = 2
MODE_VLLM_COMPILE = 3

STOCK_BACKENDS = ("inductor", "eager")

# pass_config flags of vLLM's own fusion passes. The template platform runs its
# own pass manager, which implements none of them: vLLM imports those passes
# only on its own in-tree platforms, and on an out-of-tree platform an enabled flag makes
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

    ``requested_*`` are the values before the base platform's
    ``check_and_update_config`` ran (vLLM's ``CpuPlatform`` turns VLLM_COMPILE
    into DYNAMO_TRACE_ONCE + plain Inductor, which would never call a custom
    compiler).
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
                f"compiler is bypassed (vLLM compiles with its own {requested_backend!r} adaptor)",
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


# IR ops that the CustomOp road serves instead (custom_ops/layernorm.py).
CUSTOM_OP_ROAD_OPS = ("rms_norm", "fused_add_rms_norm")
# The CustomOp names enabled on that road. vLLM names an out-of-tree replacement
# after the class it replaces (CustomOp.register_oot), so the entry that enables
# TemplateRMSNorm.forward_oot is "+RMSNorm", not the in-tree "+rms_norm".
CUSTOM_OP_ROAD_OP_NAMES = ("RMSNorm",)


# Default vLLM IR provider priorities, per device and compilation regime. Each
# device's choices (TemplateDevice.native_under_inductor) are backed by
# measurements of the providers under each regime on that device.
def default_ir_op_priority(
    provider: str,
    provider_ops: Iterable[str],
    native_under_inductor: Iterable[str],
    mode: int,
    compile_stage: str,
    ir_ops: Iterable[str],
    kernel_road: str = "ir",
) -> dict[str, list[str]]:
    """Provider priority per IR op (``ir_ops``: vLLM's ``IrOp.registry``).

    ``provider`` serves ``provider_ops`` (the device's ``ir_provider`` and
    ``ir_ops``). Device kernels first unless Inductor codegen wins: in eager
    mode and in the fusion-only stage nothing generates code, so the device
    kernel always goes first; in the graph stage an op in
    ``native_under_inductor`` stays native. On the CustomOp road the ops its
    layers serve keep only ``native`` (the layers call the kernels themselves).
    An op the device has no kernel for keeps vLLM's ``native``. ``native``
    always ends the list so every call has a provider.
    """
    served = set(provider_ops)
    codegen_wins = set(native_under_inductor) if compile_stage == "graph" else set()
    if mode != MODE_VLLM_COMPILE:
        codegen_wins = set()
    priorities = {}
    for op in ir_ops:
        keep_native = (
            op not in served
            or op in codegen_wins
            or (kernel_road == "custom_op" and op in CUSTOM_OP_ROAD_OPS)
        )
        priorities[op] = ["native"] if keep_native else [provider, "native"]
    return priorities


def custom_ops_for_road(kernel_road: str, custom_ops: Iterable[str]) -> list[str]:
    """``compilation_config.custom_ops`` entries the kernel road needs added.

    On the CustomOp road RMSNorm's ``forward_oot`` must run in every mode
    (``+RMSNorm``), also under VLLM_COMPILE where the base is ``none``.
    """
    if kernel_road != "custom_op":
        return []
    present = set(custom_ops)
    return [f"+{name}" for name in CUSTOM_OP_ROAD_OP_NAMES if f"+{name}" not in present]


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


@dataclass(frozen=True)
class GraphDecision:
    """The ``cudagraph_mode`` the platform runs, and why it is not the one requested."""

    mode: str
    """A ``CUDAGraphMode`` name."""
    why: tuple[str, ...] = ()


# CUDAGraphMode names by (decode batches, mixed batches): vLLM's runtime modes per batch kind.
_MODE_BY_PARTS = {
    ("FULL", "PIECEWISE"): "FULL_AND_PIECEWISE",
    ("FULL", "FULL"): "FULL",
    ("FULL", "NONE"): "FULL_DECODE_ONLY",
    ("PIECEWISE", "PIECEWISE"): "PIECEWISE",
    ("PIECEWISE", "NONE"): "PIECEWISE",
    ("NONE", "NONE"): "NONE",
}
_PARTS_BY_MODE = {
    "NONE": ("NONE", "NONE"),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE"),
    "FULL": ("FULL", "FULL"),
    "FULL_DECODE_ONLY": ("FULL", "NONE"),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE"),
}
GRAPH_MODES = tuple(_PARTS_BY_MODE)


def resolve_graph_mode(
    requested: str,
    *,
    enforce_eager: bool,
    pieces: bool,
    device_full_graphs: bool,
    attention_full_graphs: bool,
    runner_records_steps: bool,
) -> GraphDecision:
    """The graph mode a template platform runs for ``requested`` (after vLLM's defaults).

    vLLM runs a decode batch and a mixed (prefill) batch each as a FULL graph, as
    piecewise graphs between the attention ops, or eagerly. Here:

    - FULL graphs of decode batches need a device whose graph API records a whole
      step (``device_full_graphs``), attention kernels a graph may hold
      (``attention_full_graphs``), and a model runner that records them through
      the device (``runner_records_steps``): Model Runner V2, or V1 where the
      device's graph API is ``torch.accelerator.Graph`` (``graph_wrapper/full.py``);
      otherwise V1 wraps the model in vLLM's ``CUDAGraphWrapper``, which needs
      compiled vLLM (``torch.ops._C.weak_ref_tensor``);
    - mixed batches are never FULL graphs: ``TEMPLATE_ATTN``'s graphs hold
      single-token decodes only (``UNIFORM_SINGLE_TOKEN_DECODE``);
    - piecewise graphs need compiled pieces (``pieces``: VLLM_COMPILE);
    - ``enforce_eager`` runs everything eagerly.

    Whatever cannot run as requested falls back to piecewise graphs where there
    are pieces, else to eager; each reason is in ``why``.
    """
    if requested not in _PARTS_BY_MODE:
        raise ValueError(f"unknown cudagraph_mode {requested!r}; one of {GRAPH_MODES}")
    if requested == "NONE":
        return GraphDecision("NONE")
    if enforce_eager:
        return GraphDecision("NONE", ("enforce_eager is set",))
    why: list[str] = []
    fallback = "PIECEWISE" if pieces else "NONE"
    nothing_compiled = "nothing compiled (the compilation mode is not VLLM_COMPILE)"
    runs = "piecewise" if pieces else f"eagerly: {nothing_compiled} for piecewise graphs"
    decode, mixed = _PARTS_BY_MODE[requested]
    if decode == "FULL":
        blocked = [
            reason
            for ok, reason in (
                (device_full_graphs, "the device captures piecewise graphs only"),
                (attention_full_graphs, "the attention kernels read per-step values on the host"),
                (
                    runner_records_steps,
                    "this model runner does not record whole steps on the device (V1's "
                    "CUDAGraphWrapper needs compiled vLLM, torch.ops._C.weak_ref_tensor, unless "
                    "the graph API is torch.accelerator.Graph; Model Runner V2 calls "
                    "torch.cuda.CUDAGraph by name)",
                ),
            )
            if not ok
        ]
        if blocked:
            decode = fallback
            why.append(f"no FULL graphs ({'; '.join(blocked)}): decode batches run {runs}")
    if mixed == "FULL":
        mixed = fallback
        why.append(
            f"TEMPLATE_ATTN's FULL graphs hold single-token decodes only: mixed batches run {runs}"
        )
    if "PIECEWISE" in (decode, mixed) and not pieces:
        decode = "NONE" if decode == "PIECEWISE" else decode
        mixed = "NONE"
        why.append(f"no piecewise graphs: {nothing_compiled}")
    if decode == "NONE" and mixed == "PIECEWISE":
        decode = "PIECEWISE"
    return GraphDecision(_MODE_BY_PARTS[(decode, mixed)], tuple(why))


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


# vLLM's own variable naming the plugins to load (README, "Picking the device").
VLLM_PLUGINS_ENV = "VLLM_PLUGINS"


def ray_worker_env_vars(environ: Mapping[str, str], requested: Mapping[str, str]) -> dict[str, str]:
    """``env_vars`` of the Ray runtime env: what a Ray worker process needs when it starts.

    A Ray worker picks its vLLM platform when it imports vLLM - before vLLM's Ray
    executor hands it the engine's environment - from the environment of the Ray node
    it runs on, which on another host lacks ``VLLM_TEMPLATE_DEVICE``. So the plugin's
    variables and ``VLLM_PLUGINS`` travel in the runtime env; variables the user put
    in ``ray_runtime_env`` win.
    """
    env = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIX) or k == VLLM_PLUGINS_ENV}
    env.update(requested)
    return env

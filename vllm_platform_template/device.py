"""The device API: what each device folder provides, and how the plugin finds it.

Every backend lives in one folder, ``devices/<name>/``, whose ``device.py``
exports ``DEVICE``, a :class:`TemplateDevice`: its kernel table, attention kernels,
graph backend, IR provider name, graph and priority defaults, and its vLLM
platform class. The compiler, graph wrapper, attention backend, IR and CustomOp
glue and the hand-written model never branch on the device: they ask
:func:`device_for` (by torch device type, e.g. ``x.device.type``) or
:func:`platform_device` (the device of vLLM's current platform).

The lookup goes through the device registry (``device_registry.py``), as vLLM
resolves its platforms and attention backends by qualified name: the layers
below the platforms never import a device folder, and a device folder's
``device.py`` imports only the device API and its own kernels (no vLLM, no
platform), so the import
graph stays one-way (``tests/shared/test_import_graph.py``). Adding a device is
adding a folder: the registry is read from the folders present.

The plugin's own torch operators (``template::*``, which vLLM's quantized and MoE
layers call) reach the table through :func:`counted_kernel`, which counts their
calls for the worker's report.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from vllm_platform_template.device_registry import DEVICE_PACKAGES, folder_module
from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout

# The punica wrapper on the device-neutral LoRA operators (plain torch): a folder whose
# device torch drives names it as its ``punica_wrapper`` (``lora/punica.py``).
LORA_PUNICA_WRAPPER = "vllm_platform_template.lora.punica.TemplatePunicaWrapper"


@dataclass(frozen=True)
class KernelTable:
    """A device's kernels, with vLLM's op semantics; every road to them calls these.

    The three roads: vLLM IR providers (``ir_impls``, vLLM 0.32/0.33), the
    layers' ``CustomOp.forward_oot`` (``custom_ops``, the road after vLLM
    removes IR) and the hand-written model's direct calls (``models``). The norm and
    GELU kernels come with ``*_supports(...)``, the argument check that decides
    whether the kernel takes a call (else the caller uses vLLM's native code);
    it never looks at the batch size, so dispatch does not change with load.
    """

    rms_norm: Callable[..., torch.Tensor]
    """``rms_norm(x, weight, epsilon, variance_size=None) -> out``."""
    rms_norm_supports: Callable[..., bool]
    fused_add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    """``(x, residual, weight, epsilon, variance_size=None) -> (out, x + residual)``."""
    fused_add_rms_norm_supports: Callable[..., bool]
    gelu_and_mul_sparse: Callable[..., torch.Tensor] | None = None
    """``gelu_and_mul_sparse(x, std_multiplier, approximate="none") -> out``."""
    gelu_and_mul_sparse_supports: Callable[..., bool] | None = None
    silu_and_mul: Callable[[torch.Tensor], torch.Tensor] | None = None
    """``silu(x[..., :d]) * x[..., d:]`` (None: the device has no such kernel)."""
    rotary_embedding_: Callable[..., object] | None = None
    """In place: ``(positions, query, key, head_size, cos_sin_cache, is_neox_style)``."""
    rotary_ready: Callable[[], bool] = field(default=lambda: True)
    """Whether ``rotary_embedding_`` can run in this process."""
    w8a8_int8_linear: Callable[..., torch.Tensor] | None = None
    """``(x [M, K], weight [N, K] int8, weight_scale [N] fp32, bias) -> [M, N]``: a W8A8
    INT8 linear layer, ``x`` quantized per token inside the call
    (``reference_kernels/int8_linear.py``; None: quantized models are refused)."""
    fused_moe: Callable[..., torch.Tensor] | None = None
    """``(x, router_logits, w13, w2, top_k, renormalize) -> out``: a Mixtral-style
    mixture-of-experts block from its router logits (``reference_kernels/fused_moe.py``;
    None: MoE models are refused)."""
    fused_moe_w8a8_int8: Callable[..., torch.Tensor] | None = None
    """``(x, router_logits, w13 [E, 2I, H] int8, w13_scale [E, 2I] fp32, w2 [E, H, I]
    int8, w2_scale [E, H] fp32, top_k, renormalize) -> out``: ``fused_moe`` with W8A8
    INT8 experts (``reference_kernels/fused_moe.py``; None: INT8 MoE checkpoints are
    refused)."""


class AttentionPlanner(Protocol):
    """Per-step state of one KV-cache group's attention, made by the metadata builder."""

    def plan(
        self,
        *,
        num_reqs: int,
        num_tokens: int,
        max_query_len: int,
        seq_lens: torch.Tensor,
        query_start_loc: torch.Tensor,
    ) -> Any:
        """What every layer of a step shares (handed to :meth:`AttentionKernels.attend`).

        Kernels that graphs may hold (``AttentionKernels.full_graphs``) decide it from
        the batch shape alone - the same object for the same shape, no allocation,
        no copy to the host - so a captured graph and an eager step launch alike.
        """
        ...


class AttentionKernels(Protocol):
    """The paged-attention kernels ``TEMPLATE_ATTN`` runs on a device.

    Cache layout, slot contract and argument rules:
    ``reference_kernels/paged_attention/contract.py`` (a cache written by one
    implementation is read only by the same one). :meth:`write_kv` and
    :meth:`attend` launch without checking: ``TEMPLATE_ATTN``'s layers check
    their caches and inputs once (``contract.check_layer_*``), and each module's
    public kernel functions check every call for other users.
    """

    name: str
    """Reported as the attention path."""
    head_sizes: tuple[int, ...]
    full_graphs: bool
    """A FULL graph may hold a single-token decode step: the kernels read every
    per-step value from device tensors and the planner allocates nothing."""

    def config_problem(self, dtype: torch.dtype, block_size: int, head_size: int) -> str | None:
        """Why these kernels cannot serve a layer in this process, or None."""
        ...

    def planner(
        self, layout: AttentionLayout, max_num_reqs: int, device: torch.device
    ) -> AttentionPlanner:
        """The planner of one KV-cache group (persistent scratch lives in it)."""
        ...

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None: ...

    @property
    def rope_and_write_kv(self) -> Callable[..., None] | None:
        """The rotary embedding and the KV write in one kernel, for the hand-fused model:
        ``(positions, query, key, value, head_size, cos_sin_cache, is_neox_style,
        key_cache, value_cache, slot_mapping)``, query and key rotated in place. None:
        the model rotates with the kernel table's ``rotary_embedding_`` and writes with
        :meth:`write_kv`."""
        ...

    def attend(
        self,
        query: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        output: torch.Tensor,
        *,
        block_table: torch.Tensor,
        seq_lens: torch.Tensor,
        query_start_loc: torch.Tensor,
        scale: float,
        plan: Any,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
    ) -> None:
        """Causal attention of ``query`` over the paged caches into ``output``, as ``plan``
        says. ``key``/``value`` ``[T, Hkv, D]``: the step's new keys and values, already
        written to the caches; kernels may read the new keys there instead."""
        ...


@dataclass
class CapturedGraph:
    """One recorded graph: the backend's handle and the static outputs."""

    handle: Any
    output: Any


def capture_accelerator_graph(fn: Callable[[], Any], pool: Any) -> CapturedGraph:
    """``fn``'s launches recorded into a ``torch.accelerator.Graph`` in ``pool``.

    torch's device-neutral graphs (torch >= 2.13; the device's extension registers its
    implementation): captured on the current stream, or on a side stream where that
    is the default stream (not capturable), after the work already queued.
    """
    graph = torch.accelerator.Graph(pool=pool)
    current = torch.accelerator.current_stream()
    stream = current if current.stream_id != 0 else torch.Stream(device=current.device)
    stream.wait_stream(current)
    with stream, graph:
        output = fn()
    current.wait_stream(stream)
    return CapturedGraph(graph, output)


class GraphBackend(Protocol):
    """How a device records a callable's kernels and replays them on the same memory."""

    name: str
    pool: Any
    """The memory pool captures allocate from (None: the backend keeps none); vLLM's V1
    runner swaps it to size graph memory (``graph_wrapper/full.py``)."""

    def capture(self, fn: Callable[[], Any]) -> CapturedGraph: ...

    def replay(self, graph: CapturedGraph) -> None: ...

    def weak_output(self, output: Any) -> Any:
        """``output`` as the wrapper keeps it after capture: non-owning where the
        backend's graph pool owns the memory (vLLM's ``weak_ref_output``)."""
        ...


@dataclass(frozen=True)
class TemplateDevice:
    """Everything the plugin needs to know about one backend (``devices/<name>``)."""

    name: str
    """The folder name (``devices/<name>``)."""
    torch_device_type: str
    """Its tensors' device type, also the ``VLLM_TEMPLATE_DEVICE`` value selecting it."""
    ir_provider: str
    """The vLLM IR provider name its kernel table registers as."""
    status: Callable[[], tuple[bool, str]]
    """``(usable, reason)``: whether its kernels run on this machine (a library
    loaded, the device present), checked without importing them."""
    kernels: Callable[[], KernelTable]
    """Loads the kernel table (imports the kernels on first use)."""
    load_libraries: Callable[[], None]
    """Loads the kernel libraries a worker needs (``Platform.import_kernels``); raises
    nothing, a library that cannot load leaves its kernels' fallbacks in place."""
    ir_ops: tuple[str, ...]
    """The vLLM IR ops its kernel table implements (its IR provider's coverage)."""
    fused_add_rms_norm_inplace: bool
    """True: its ``fused_add_rms_norm`` writes ``out`` into ``x`` and the sum into
    ``residual`` (vLLM IR's ``inplace`` implementations)."""
    graph_backend: Callable[[Any], GraphBackend]
    """``graph_backend(pool)``: the static-graph backend (``devices/<name>/graphs.py``)."""
    attention: Callable[[], AttentionKernels | None] = field(default=lambda: None)
    """Loads the attention kernels (None: the plain-torch reference only)."""
    native_under_inductor: tuple[str, ...] = ()
    """IR ops whose Inductor-generated code beats the device kernel in the graph stage."""
    default_graph_mode: str | None = None
    """``cudagraph_mode`` when the user sets none (None: vLLM's default)."""
    max_capture_size: Callable[[int, int], int | None] = field(default=lambda seqs, q: None)
    """``(max_num_seqs, decode_query_len) -> `` largest graph size (None: vLLM's)."""
    environment_variables: dict[str, str] = field(default_factory=dict)
    """The ``VLLM_TEMPLATE_*`` variables this folder reads, with what each does."""
    uses_graph_pool: bool = False
    """Its graphs allocate from the platform's global graph pool (``graph_pool_handle``)."""
    records_whole_steps: bool = False
    """Its graph API records a whole model step (vLLM's Model Runner V2 captures FULL
    graphs with ``torch.<device>.graph``). False: piecewise graphs only. One of the two
    facts FULL graphs need; the other is the attention kernels the engine resolves
    (``AttentionKernels.full_graphs``); ``policy.resolve_graph_mode`` takes both."""
    whole_steps_on_v1: bool = False
    """vLLM's V1 model runner records those steps through the platform's FULL wrapper
    (``graph_wrapper/full.py``: the graph API is ``torch.accelerator.Graph``). False:
    Model Runner V2 records them."""
    pinned_device_view: Callable[[torch.Tensor], torch.Tensor] | None = None
    """A device view of pinned host memory (vLLM's UVA buffers), if the device has one."""
    kernel_test_device_type: str | None = None
    """Where the conformance kit runs its provider (None: ``torch_device_type``)."""
    packages: tuple[str, ...] = ()
    """The distributions its kernels come from, whose versions reports name."""
    describe_libraries: Callable[[], dict[str, Any]] | None = None
    """Loads its kernel libraries (:attr:`load_libraries`) and says what loaded and why,
    for reports (``doctor``, the kernel benchmarks): ``name``, ``loaded``, ``reason`` and what
    else matters. None: nothing to describe."""
    checkpoint_dtype: Callable[[str], tuple[str, str | None]] = field(
        default=lambda dtype: (dtype, None)
    )
    """``(checkpoint dtype) -> (dtype to run, why it differs or None)``: where the device
    cannot run a checkpoint's dtype well here, the dtype the demo runs instead."""
    graph_mode_note: str = ""
    """Why :attr:`default_graph_mode` is what it is, when it is not vLLM's, for reports."""
    explain_log_warnings: Callable[[dict[str, Any]], str] | None = None
    """``(engine report) -> what the warnings its vLLM worker logs are about``, for reports
    (None: it logs none worth explaining)."""
    punica_wrapper: str | None = None
    """The class vLLM's LoRA layers call (``Platform.get_punica_wrapper``), by path; None:
    ``enable_lora`` is refused when vLLM checks the config, saying what to write."""

    def kernels_status(self) -> tuple[bool, str]:
        """:attr:`status`, computed once per process."""
        return _kernels_status(self.status)


@functools.cache
def _kernels_status(status: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    return status()


@functools.cache
def device_for(torch_device_type: str) -> TemplateDevice | None:
    """The template device whose tensors have ``torch_device_type``, or None."""
    if torch_device_type not in DEVICE_PACKAGES:
        return None
    device = folder_module(torch_device_type, "device").DEVICE  # type: ignore[union-attr]
    assert isinstance(device, TemplateDevice), torch_device_type
    return device


def platform_device(platform: Any) -> TemplateDevice:
    """The template device of a vLLM platform (``vllm.platforms.current_platform``)."""
    device = device_for(platform.device_type)
    if device is None:
        raise RuntimeError(
            f"the template plugin has no device for vLLM's platform "
            f"{type(platform).__name__} (device type {platform.device_type!r})"
        )
    return device


@functools.cache
def kernel_table(torch_device_type: str) -> KernelTable | None:
    """The kernels for tensors on ``torch_device_type`` if they can run here, else None."""
    device = device_for(torch_device_type)
    if device is None:
        return None
    return device.kernels() if device.kernels_status()[0] else None


# {kernel-table entry: {device type: calls}} of the plugin's own torch operators
# (``template::*``: the quantized linear layers' and the MoE layers') in this process:
# eager calls and graph captures (a replayed graph does not run Python). The worker's
# report shows them (``reporting.py``).
OP_CALLS: defaultdict[str, Counter[str]] = defaultdict(Counter)


def counted_kernel(entry: str, torch_device_type: str) -> Callable[..., Any]:
    """The kernel table's ``entry`` for ``torch_device_type`` tensors, its call counted in
    :data:`OP_CALLS`; RuntimeError where the device has none."""
    table = kernel_table(torch_device_type)
    kernel = getattr(table, entry) if table is not None else None
    if kernel is None:
        raise RuntimeError(f"no template {entry} kernel for {torch_device_type} tensors")
    OP_CALLS[entry][torch_device_type] += 1
    return kernel

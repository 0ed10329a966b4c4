"""Paged attention through vLLM's CPU attention kernels (``torch.ops._C``), no vLLM import.

vLLM's CPU build registers three ops once a process has loaded it
(``devices/cpu/vllm_cpu_build.py``; the platform does so in every worker
through ``Platform.import_kernels``):

- ``get_scheduler_metadata``: per-batch work split, computed once per step by
  the metadata builder and shared by every layer of the step. It records the
  OpenMP thread count; the attention op checks it, so build and run it under one
  thread configuration.
- ``cpu_attn_reshape_and_cache``: the KV write.
- ``cpu_attention_with_kv_cache``: the attention.

The kernels store a block in an instruction-set-specific interior layout (keys
transposed for ``vec``/``vec16``, AMX tiles for ``amx``), chosen by
:func:`isa_for`; the ISA passed to the write, the metadata and the attention must
agree, and a cache they write must not be read by another path. Index tensors
are CPU int32 (``seq_lens``, ``query_start_loc``, ``block_table``); ``slot_mapping``
is int64 with ``-1`` = skip. This module mirrors
``vllm/v1/attention/backends/cpu_attn.py`` for the plain causal decoder case with
an unquantized (``"auto"``) KV cache.
"""

from __future__ import annotations

import functools
import os
import platform

import torch

from vllm_platform_template.reference_kernels.paged_attention.contract import (
    AttentionLayout,
    check_attention,
    check_kv_write,
)

OPS = ("get_scheduler_metadata", "cpu_attn_reshape_and_cache", "cpu_attention_with_kv_cache")
SUPPORTED_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
"""Head sizes vLLM 0.32's CPU_ATTN backend declares (``vec16`` serves the ones not
divisible by 32)."""
KV_CACHE_DTYPE = "auto"  # unquantized cache: same dtype as the model


def available() -> tuple[bool, str]:
    """Whether vLLM's CPU attention ops are loaded: ``(ok, reason)``; never raises."""
    try:
        namespace = torch.ops._C
        missing = [name for name in OPS if not hasattr(namespace, name)]
    except (AttributeError, RuntimeError) as exc:
        return False, f"torch.ops._C is not usable ({type(exc).__name__}: {exc})"
    if missing:
        return False, (
            f"vLLM's CPU attention ops {missing} are not in torch.ops._C "
            "(load them first: devices.cpu.vllm_cpu_build.load_cpu_kernels())"
        )
    return True, "vLLM CPU attention ops loaded in torch.ops._C"


def _cpu_arch() -> str:
    """``platform.machine()`` classified as vLLM's ``Platform.get_cpu_architecture``."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686"):
        return "x86"
    if machine.startswith(("arm", "aarch")):
        return "arm"
    if machine.startswith("ppc"):
        return "powerpc"
    if machine == "s390x":
        return "s390x"
    if machine.startswith("riscv"):
        return "riscv"
    return "other"


def config_problem(dtype: torch.dtype, block_size: int, head_size: int) -> str | None:
    """Why the CPU kernels cannot serve this configuration, or None when they can."""
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return f"dtype {dtype} is not supported (float32, bfloat16, float16)"
    if head_size not in SUPPORTED_HEAD_SIZES:
        return f"head_size {head_size} is not one of {SUPPORTED_HEAD_SIZES}"
    if block_size <= 0 or block_size % 16 != 0:
        return f"block_size {block_size} is not a positive multiple of 16"
    if block_size % 32 != 0 and _cpu_arch() == "arm":
        # vLLM's CPU backend only ever runs the NEON kernels on multiples of 32.
        return f"block_size {block_size} is not a multiple of 32 (required on Arm)"
    return None


@functools.cache
def isa_for(dtype: torch.dtype, block_size: int, head_size: int) -> str:
    """The kernel ISA for this configuration (vLLM's ``cpu_attn._get_attn_isa``, ``auto`` KV).

    ``"vec16"`` for head sizes not divisible by 32 or blocks not divisible by 32,
    ``"amx"`` for bfloat16 with AMX tiles, ``"neon"`` on Arm, ``"vec"`` (or the
    architecture's vector ISA) otherwise. Raises ``ValueError`` for unsupported
    configurations (see :func:`config_problem`).
    """
    problem = config_problem(dtype, block_size, head_size)
    if problem is not None:
        raise ValueError(f"vLLM CPU attention kernels: {problem}")
    if head_size % 32 != 0:
        return "vec16"
    arch = _cpu_arch()
    if torch.cpu._is_amx_tile_supported() and dtype == torch.bfloat16 and block_size % 32 == 0:
        return "amx"
    if arch == "arm":
        return "neon"
    if block_size % 32 != 0:
        return "vec16"
    if arch == "riscv" and _has_rvv():
        return "rvv"
    return {"s390x": "vxe", "powerpc": "vsx"}.get(arch, "vec")


def _has_rvv() -> bool:
    """The RISC-V vector kernels were compiled into this build."""
    try:
        return bool(torch.ops._C.cpu_attn_has_isa("rvv"))
    except (AttributeError, RuntimeError):
        return False


def scheduler_metadata(
    *,
    num_heads: int,
    num_kv_heads: int,
    head_size: int,
    dtype: torch.dtype,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    isa: str,
    causal: bool = True,
    enable_kv_split: bool = True,
) -> torch.Tensor:
    """The per-step work split (an int8 blob) for :func:`paged_attention`.

    ``seq_lens``/``query_start_loc``: contiguous CPU int32 ``[num_reqs]`` and
    ``[num_reqs + 1]`` - the same tensors later passed to the attention.
    ``dtype`` is the query (model) dtype.
    """
    op = "scheduler_metadata"
    for name, t in (("seq_lens", seq_lens), ("query_start_loc", query_start_loc)):
        if t.dtype != torch.int32 or t.dim() != 1 or not t.is_contiguous():
            raise ValueError(
                f"{op}: {name} must be a contiguous 1-D int32 tensor, got {t.dtype} "
                f"shape {tuple(t.shape)}"
            )
    if query_start_loc.shape[0] != seq_lens.shape[0] + 1:
        raise ValueError(
            f"{op}: query_start_loc has {query_start_loc.shape[0]} entries, expected "
            f"{seq_lens.shape[0] + 1}"
        )
    return torch.ops._C.get_scheduler_metadata(
        seq_lens.shape[0],
        num_heads,
        num_kv_heads,
        head_size,
        seq_lens,
        dtype,
        query_start_loc,
        causal,
        -1,  # sliding window: none
        isa,
        enable_kv_split,
        None,  # dynamic (per-request) causality
        KV_CACHE_DTYPE,
    )


def reshape_and_cache_(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    isa: str,
) -> None:
    """Write ``key``/``value`` ``[T, Hkv, D]`` at ``slot_mapping`` (int64, -1 = skip)."""
    check_kv_write("cpu.reshape_and_cache_", key, value, key_cache, value_cache, slot_mapping)
    _cpu_write_kv(key, value, key_cache, value_cache, slot_mapping, isa)


def _cpu_write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    isa: str,
) -> None:
    n = slot_mapping.shape[0]
    torch.ops._C.cpu_attn_reshape_and_cache(
        key[:n], value[:n], key_cache, value_cache, slot_mapping, isa, 1.0, 1.0, KV_CACHE_DTYPE
    )


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    scheduler_metadata: torch.Tensor,
) -> torch.Tensor:
    """Causal paged attention (same contract as ``reference.paged_attention``).

    ``scheduler_metadata`` comes from :func:`scheduler_metadata` for this batch;
    ``output`` must be contiguous (the kernel writes it by raw offset).
    """
    op = "cpu.paged_attention"
    check_attention(
        op, query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc
    )
    if not output.is_contiguous():
        raise ValueError(f"{op}: output must be contiguous, got strides {tuple(output.stride())}")
    if query.stride(-1) != 1 or block_table.stride(-1) != 1:
        raise ValueError(f"{op}: query and block_table need a contiguous last dimension")
    _cpu_attention(
        query,
        key_cache,
        value_cache,
        output,
        block_table,
        seq_lens,
        query_start_loc,
        scale,
        scheduler_metadata,
    )
    return output


def _cpu_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    scheduler_metadata: torch.Tensor,
) -> None:
    torch.ops._C.cpu_attention_with_kv_cache(
        query,
        key_cache,
        value_cache,
        output,
        query_start_loc,
        seq_lens,
        float(scale),
        True,  # causal
        None,  # alibi slopes
        -1,  # sliding window
        block_table,
        0.0,  # logits soft cap
        scheduler_metadata,
        None,  # attention sinks
        None,  # dynamic causality
        1.0,  # k scale
        1.0,  # v scale
        KV_CACHE_DTYPE,
    )


class CpuSchedulerPlanner:
    """The CPU kernels' per-step work split, computed once per step for all layers."""

    def __init__(self, layout: AttentionLayout) -> None:
        self.layout = layout
        self.isa = isa_for(layout.dtype, layout.block_size, layout.head_size)
        # vLLM's VLLM_CPU_ATTN_SPLIT_KV (default on), read once per KV-cache group.
        self.enable_kv_split = bool(int(os.environ.get("VLLM_CPU_ATTN_SPLIT_KV", "1")))

    def plan(
        self,
        *,
        num_reqs: int,
        num_tokens: int,
        max_query_len: int,
        seq_lens: torch.Tensor,
        query_start_loc: torch.Tensor,
    ) -> torch.Tensor:
        """The step's scheduler metadata (it depends on the lengths: computed per step)."""
        layout = self.layout
        return scheduler_metadata(
            num_heads=layout.num_heads,
            num_kv_heads=layout.num_kv_heads,
            head_size=layout.head_size,
            dtype=layout.dtype,
            seq_lens=seq_lens,
            query_start_loc=query_start_loc,
            isa=self.isa,
            enable_kv_split=self.enable_kv_split,
        )


class CpuAttentionKernels:
    """vLLM's CPU attention kernels as the CPU device's ``AttentionKernels``.

    No graph can hold them (``full_graphs`` False): the work split is computed on
    the host from the step's lengths.
    """

    name = "cpu_kernels"
    head_sizes: tuple[int, ...] = SUPPORTED_HEAD_SIZES
    full_graphs = False
    rope_and_write_kv = None  # rotary and KV write are two kernels (write_kv)

    def config_problem(self, dtype: torch.dtype, block_size: int, head_size: int) -> str | None:
        usable, reason = available()
        return config_problem(dtype, block_size, head_size) if usable else reason

    def planner(
        self, layout: AttentionLayout, max_num_reqs: int, device: torch.device
    ) -> CpuSchedulerPlanner:
        return CpuSchedulerPlanner(layout)

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        isa = isa_for(key_cache.dtype, key_cache.shape[2], key_cache.shape[3])
        _cpu_write_kv(key, value, key_cache, value_cache, slot_mapping, isa)

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
        plan: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
    ) -> None:
        _cpu_attention(
            query,
            key_cache,
            value_cache,
            output,
            block_table,
            seq_lens,
            query_start_loc,
            scale,
            plan,
        )

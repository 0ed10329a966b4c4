"""The Triton paged-attention kernels as the device's ``AttentionKernels``.

vLLM hook served: the attention kernels behind ``Platform.get_attn_backend_cls``
(``TEMPLATE_ATTN``'s impl and metadata builder, ``attention/``, run them on the
device); the kernels themselves are in ``reference_kernels/paged_attention.py`` (plain
cache layout, the reference's). The builder keeps one
``TritonAttentionPlanner`` per KV-cache group: a launch plan per batch shape,
made once, and one persistent split scratch, so a FULL graph can hold a decode
step (``full_graphs``). docs/porting-guide.md, "Attention kernels".
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` (Triton's interpreter
on the CPU) and, on the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import torch

from vllm_platform_template.devices.gpu.kernels import kv_write, paged_attention, rotary
from vllm_platform_template.devices.gpu.kernels.paged_attention import (
    AttentionPlan,
    TritonAttentionPlanner,
)
from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout


class TritonAttentionKernels:
    """Causal paged attention and KV write in Triton; the rotary + KV write fused."""

    name = "triton"
    head_sizes: tuple[int, ...] = ()  # any: the kernels tile the head dim to a power of two
    full_graphs = True

    def config_problem(self, dtype: torch.dtype, block_size: int, head_size: int) -> str | None:
        return None

    def planner(
        self, layout: AttentionLayout, max_num_reqs: int, device: torch.device
    ) -> TritonAttentionPlanner:
        planner = TritonAttentionPlanner(layout, max_num_reqs, device)
        planner.warm_up()  # before vLLM's warm-up and capture: no compile while serving
        return planner

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        kv_write.write_kv_unchecked(key, value, key_cache, value_cache, slot_mapping)

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
        plan: AttentionPlan,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
    ) -> None:
        paged_attention.attend_unchecked(
            query,
            key_cache,
            value_cache,
            output,
            block_table,
            seq_lens,
            query_start_loc,
            scale,
            plan,
            key,
            value,
        )

    def rope_and_write_kv(
        self,
        positions: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        head_size: int,
        cos_sin_cache: torch.Tensor,
        is_neox_style: bool,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        """Rotate ``query``/``key`` in place and write key and value, in one kernel."""
        rotary.rotary_embedding_and_cache_(
            positions,
            query,
            key,
            value,
            head_size,
            cos_sin_cache,
            is_neox_style,
            key_cache,
            value_cache,
            slot_mapping,
        )

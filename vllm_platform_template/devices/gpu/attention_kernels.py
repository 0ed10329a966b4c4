"""The Triton paged-attention kernels as the device's ``AttentionKernels``.

vLLM hook served: the attention kernels behind ``Platform.get_attn_backend_cls``
(``TEMPLATE_ATTN``'s impl and metadata builder, ``attention/``, run them on the
device); the kernels themselves are in ``kernels/paged_attention.py`` (plain
cache layout, the reference's). docs/porting-guide.md, "9. Attention kernels".
Proven by ``tests/unit/test_triton_kernels_interpret.py`` (Triton's interpreter
on the CPU) and, on the device, ``tests/gpu/test_triton_kernels.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_platform_template.devices.gpu.kernels import paged_attention, rotary


class TritonAttentionKernels:
    """Causal paged attention and KV write in Triton; the rotary + KV write fused."""

    name = "triton"
    head_sizes: tuple[int, ...] = ()  # any: the kernels tile the head dim to a power of two

    def config_problem(self, dtype: torch.dtype, block_size: int, head_size: int) -> str | None:
        return None

    def prepare(self, **batch: Any) -> None:
        return None  # the kernels read the batch tensors directly

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        paged_attention.reshape_and_cache_(key, value, key_cache, value_cache, slot_mapping)

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
        max_query_len: int,
        max_seq_len: int,
        prepared: Any,
    ) -> None:
        paged_attention.paged_attention(
            query,
            key_cache,
            value_cache,
            output,
            block_table,
            seq_lens,
            query_start_loc,
            scale,
            max_query_len,
            max_seq_len,
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

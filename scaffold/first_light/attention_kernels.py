"""The device's paged attention: its extension's kernels where registered, else the reference.

vLLM hook served: the attention kernels behind ``Platform.get_attn_backend_cls``
(``TEMPLATE_ATTN``'s impl and metadata builder run them). The reference
(``vllm_platform_template/reference_kernels/paged_attention/reference.py``) runs on any
device but reads each step's lengths on the host, so no graph can hold it. Where the
extension registers ``torch.ops.<LIBRARY>.reshape_and_cache`` and ``paged_attention``
(the test device does), :class:`DeviceAttentionKernels` launches them: the cache layout
and arguments of ``reference_kernels/paged_attention/contract.py``, the lengths read from
device memory when they run, so FULL decode graphs may hold them (``full_graphs``).
Speed: docs/porting-guide.md, "11. Attention kernels". Proven by
``tests/shared/test_attention_backend.py`` and
``tests/devices/gpu/test_gpu_full_graphs.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_platform_template.device import AttentionKernels
from vllm_platform_template.devices.gpu.kernels import LIBRARY, registered
from vllm_platform_template.reference_kernels.paged_attention.reference import (
    ReferenceAttentionKernels,
)


class DeviceAttentionKernels(ReferenceAttentionKernels):
    """The device extension's KV write and paged attention (the reference's checks)."""

    name = f"{LIBRARY}::paged_attention"
    full_graphs = True

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        getattr(torch.ops, LIBRARY).reshape_and_cache(
            key, value, key_cache, value_cache, slot_mapping
        )

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
        getattr(torch.ops, LIBRARY).paged_attention(
            output, query, key_cache, value_cache, block_table, seq_lens, query_start_loc, scale
        )


def attention_kernels() -> AttentionKernels:
    """The device's kernels where its extension registers both, else the reference."""
    if registered("reshape_and_cache") and registered("paged_attention"):
        return DeviceAttentionKernels()
    return ReferenceAttentionKernels()

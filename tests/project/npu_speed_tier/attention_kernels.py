"""The test device's speed tier: its paged attention, which a FULL graph may hold.

What a vendor writes into a first-light plugin's ``devices/npu/attention_kernels.py``
once the device's extension ships attention kernels: the KV write and causal paged
attention of the reference's contract (cache layout, slots), launched as the
extension's operators (``torch.ops.npu.reshape_and_cache`` and
``paged_attention``). They read the batch's lengths from device memory when they
run, so one captured launch serves every replay: ``full_graphs``. ``test_scaffold.py``
copies this file over a generated ``new acme --device npu`` plugin's.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm_acme.reference_kernels.paged_attention.reference import ReferenceAttentionKernels


class DeviceAttentionKernels(ReferenceAttentionKernels):
    """The test device's attention kernels (the reference's checks and planner)."""

    name = "npu_test"
    full_graphs = True

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        torch.ops.npu.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)

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
        torch.ops.npu.paged_attention(
            output, query, key_cache, value_cache, block_table, seq_lens, query_start_loc, scale
        )

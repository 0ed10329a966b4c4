"""The compiled kernel vLLM's V1 model runner launches on every step, in plain torch.

vLLM 0.32's model runner computes each step's KV-cache slots on the device with
a kernel of its own kernel language (``vllm.v1.worker.block_table.ComputeSlotMappingKernel``);
a device without that compiler needs it in torch. vLLM's hook for that is
``Platform.register_triton_kernel_overrides`` (``vllm.triton_utils.dispatcher``),
which the device folder's platform answers with :data:`OVERRIDES` when its
identity names no kernel compiler (docs/porting-guide.md, "4. Worker and model
runner"). The slot contract is the paged cache's (``paged_attention``): token
``i`` of request ``r`` at position ``p`` lands in slot
``block_table[r, p // block_size] * block_size + p % block_size``; slots past
the batch's tokens are padding (``PAD_ID``). No vLLM import here. Proven by
``tests/shared/test_model_runner_kernels.py`` (against the loop of vLLM's kernel,
and launched through vLLM's own launcher) and by the first-light engine
test (``tests/devices/gpu/test_gpu_first_light.py``).
"""

from __future__ import annotations

import torch


def compute_slot_mapping(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    block_table_stride: int,
    slot_mapping: torch.Tensor,
    KV_CACHE_BLOCK_SIZE: int,  # vLLM's kernel's parameter names, which vLLM binds
    TOTAL_CP_WORLD_SIZE: int = 1,
    TOTAL_CP_RANK: int = 0,
    CP_KV_CACHE_INTERLEAVE_SIZE: int = 1,
    PAD_ID: int = -1,
    BLOCK_SIZE: int = 1024,
) -> None:
    """``slot_mapping[:max_num_tokens]`` for the batch, in the kernel's parameter order.

    ``query_start_loc`` (int32, one entry per request plus one) splits the
    ``num_tokens`` positions into requests; ``block_table`` rows are requests.
    Context parallelism (a block split across ranks) is not supported.
    """
    if TOTAL_CP_WORLD_SIZE != 1:
        raise ValueError(
            f"compute_slot_mapping: context parallelism ({TOTAL_CP_WORLD_SIZE} ranks) needs "
            "vLLM's Triton kernel; the torch version serves one rank"
        )
    device = slot_mapping.device
    slot_mapping[num_tokens:max_num_tokens] = PAD_ID
    if num_tokens == 0:
        return
    tokens = torch.arange(num_tokens, device=device)
    # the request each token belongs to: the last start at or before it
    starts = query_start_loc.to(device=device, dtype=torch.int64)
    requests = torch.searchsorted(starts, tokens, right=True) - 1
    position = positions[:num_tokens].to(torch.int64)
    rows = block_table.reshape(-1, block_table_stride)
    blocks = rows[requests, position // KV_CACHE_BLOCK_SIZE].to(torch.int64)
    slot_mapping[:num_tokens] = blocks * KV_CACHE_BLOCK_SIZE + position % KV_CACHE_BLOCK_SIZE


# vLLM's kernel name -> the torch version (vllm.triton_utils.dispatcher.register_kernels)
OVERRIDES = {"vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping}

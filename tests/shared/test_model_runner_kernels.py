"""The model runner's per-step compiled kernel in torch (``reference_kernels/model_runner.py``).

``compute_slot_mapping`` must give the slots vLLM's own kernel gives: each
token of a request at position ``p`` lands in
``block_table[r, p // block_size] * block_size + p % block_size``, the rest of
the batch's buffer is padding, nothing past it is written. The reference here
is that kernel's loop, transcribed; and vLLM's own launcher
(``ComputeSlotMappingKernel``, through ``vllm.triton_utils.dispatcher``'s
``KernelOverride``, as ``Platform.register_triton_kernel_overrides`` installs
it) must reach the torch version with the arguments in the right places.
"""

from __future__ import annotations

import pytest
import torch

from vllm_platform_template.reference_kernels.model_runner import OVERRIDES, compute_slot_mapping

PAD = -1
UNTOUCHED = 7


def _kernel_loop(starts, positions, block_table, block_size, num_tokens, max_num_tokens, size):
    """vLLM 0.32's ComputeSlotMappingKernel.kernel, one program per request, in Python."""
    slots = [UNTOUCHED] * size
    for i in range(num_tokens, max_num_tokens):
        slots[i] = PAD
    for request in range(len(starts) - 1):
        for i in range(starts[request], starts[request + 1]):
            block = block_table[request][positions[i] // block_size]
            slots[i] = block * block_size + positions[i] % block_size
    return slots


def _batch(seed: int, lengths: list[int], block_size: int, max_blocks: int = 8):
    generator = torch.Generator().manual_seed(seed)
    starts = [0]
    positions: list[int] = []
    for length in lengths:
        start = int(torch.randint(0, max_blocks * block_size - length, (1,), generator=generator))
        positions += range(start, start + length)
        starts.append(starts[-1] + length)
    table = torch.randint(0, 1000, (len(lengths) + 2, max_blocks), generator=generator)
    return (
        torch.tensor(starts, dtype=torch.int32),
        torch.tensor(positions, dtype=torch.int64),
        table.to(torch.int32),
    )


@pytest.mark.parametrize(
    ("lengths", "block_size", "padding"),
    [([3, 1, 5], 16, 3), ([1], 16, 0), ([40, 2], 8, 5), ([1, 1, 1, 1], 32, 4)],
)
def test_slots_are_the_kernels(lengths: list[int], block_size: int, padding: int) -> None:
    starts, positions, table = _batch(len(lengths), lengths, block_size)
    num_tokens = int(starts[-1])
    slots = torch.full((num_tokens + padding + 4,), UNTOUCHED, dtype=torch.int64)
    compute_slot_mapping(
        num_tokens, num_tokens + padding, starts, positions, table, table.stride(0), slots,
        block_size,
    )  # fmt: skip
    expected = _kernel_loop(
        starts.tolist(), positions.tolist(), table.tolist(), block_size, num_tokens,
        num_tokens + padding, slots.numel(),
    )  # fmt: skip
    assert slots.tolist() == expected


def test_an_empty_batch_is_all_padding() -> None:
    slots = torch.full((6,), UNTOUCHED, dtype=torch.int64)
    table = torch.zeros((2, 4), dtype=torch.int32)
    empty = torch.zeros(0, dtype=torch.int64)
    compute_slot_mapping(0, 4, torch.zeros(1, dtype=torch.int32), empty, table, 4, slots, 16)
    assert slots.tolist() == [PAD] * 4 + [UNTOUCHED] * 2


def test_context_parallelism_is_refused_with_what_to_use() -> None:
    slots = torch.zeros(4, dtype=torch.int64)
    starts, positions, table = _batch(0, [2], 16)
    with pytest.raises(ValueError, match="context parallelism"):
        compute_slot_mapping(2, 4, starts, positions, table, table.stride(0), slots, 16, 2)


def test_vllms_launcher_reaches_the_torch_version() -> None:
    from vllm.triton_utils.dispatcher import KernelOverride
    from vllm.v1.worker.block_table import ComputeSlotMappingKernel

    (name,) = OVERRIDES
    assert name == "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"
    launcher = ComputeSlotMappingKernel()
    launcher.kernel = KernelOverride(ComputeSlotMappingKernel.kernel, compute_slot_mapping)
    starts, positions, table = _batch(3, [4, 2], 16)
    slots = torch.full((10,), UNTOUCHED, dtype=torch.int64)
    launcher(2, 6, 8, starts, positions, table, table.stride(0), slots, 16, 1, 0, 1)
    expected = _kernel_loop(starts.tolist(), positions.tolist(), table.tolist(), 16, 6, 8, 10)
    assert slots.tolist() == expected

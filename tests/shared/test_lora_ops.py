"""The LoRA operators of ``reference_kernels/lora.py``, which the punica wrapper
(``lora/punica.py``) runs on any device torch drives.

Against a token-by-token loop of vLLM's semantics, with slot -1 ("no adapter") left
alone; vLLM 0.32's own torch op gives such a token the last slot's adapter, which a
test shows (the bug the template's punica wrapper avoids). On the PrivateUse1 test
device the operators are recorded in a device graph, which refuses any operator whose
output size depends on data, and replayed with another batch's adapter slots.
"""

from __future__ import annotations

import pytest
import torch
from test_device_child import run_with_test_device

from vllm_platform_template.reference_kernels import lora as ops

SLOTS, RANK, HIDDEN, OUT = 3, 4, 16, 12
INDICES = torch.tensor([0, -1, 2, 2, -1, 1, 0])


def _weights(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(SLOTS, 1, RANK, HIDDEN, generator=gen)
    b = torch.randn(SLOTS, 1, OUT, RANK, generator=gen)
    return a, b


def test_shrink_and_expand_follow_each_tokens_slot_and_skip_minus_one() -> None:
    a, b = _weights(0)
    x = torch.randn(len(INDICES), HIDDEN)
    buffer = torch.full((len(INDICES), RANK), 7.0)
    ops.shrink(x, a, buffer, INDICES, 0.5)
    y = torch.ones(len(INDICES), OUT + 4)
    ops.expand(buffer, b, y, INDICES, offset=2, size=OUT)
    for t, slot in enumerate(INDICES.tolist()):
        if slot < 0:
            assert torch.equal(buffer[t], torch.zeros(RANK))
            assert torch.equal(y[t], torch.ones(OUT + 4))
            continue
        shrunk = 0.5 * x[t] @ a[slot, 0].T
        torch.testing.assert_close(buffer[t], shrunk)
        torch.testing.assert_close(y[t, 2 : 2 + OUT], 1 + shrunk @ b[slot, 0].T)
        assert torch.equal(y[t, :2], torch.ones(2)) and torch.equal(y[t, 2 + OUT :], torch.ones(2))


def test_expand_without_add_overwrites_only_the_adapters_rows() -> None:
    _, b = _weights(1)
    x = torch.randn(len(INDICES), RANK)
    y = torch.full((len(INDICES), OUT), 3.0)
    ops.expand(x, b, y, INDICES, add=False)
    assert torch.equal(y[1], torch.full((OUT,), 3.0))
    torch.testing.assert_close(y[0], x[0] @ b[0, 0].T)


def test_one_slot_serves_every_token_as_in_vllms_ops() -> None:
    a, _ = _weights(2)
    x = torch.randn(3, HIDDEN)
    out = torch.zeros(3, RANK)
    ops.shrink(x, a, out, torch.tensor([1]), 1.0)
    torch.testing.assert_close(out, x @ a[1, 0].T)


def test_vllms_cpu_op_gives_a_token_without_adapter_the_last_slot() -> None:
    """Why the template has its own operators (vllm-project/vllm#48421, open)."""
    from vllm.lora.ops.torch_ops import bgmv_shrink

    a, _ = _weights(3)
    x = torch.randn(1, HIDDEN)
    stock = torch.zeros(1, RANK)
    bgmv_shrink(x, a, stock, torch.tensor([-1]), 1.0)
    torch.testing.assert_close(stock[0], x[0] @ a[SLOTS - 1, 0].T)  # the last adapter's
    ours = torch.full((1, RANK), 5.0)
    ops.shrink(x, a, ours, torch.tensor([-1]), 1.0)
    assert torch.equal(ours, torch.zeros(1, RANK))


def test_a_device_graph_records_the_operators_and_replays_them_for_other_slots() -> None:
    """Captured with one batch's slots (a token without adapter among them), replayed with
    another's: each replay equals the loop of vLLM's semantics on the CPU."""
    pytest.importorskip("npu_test_device")
    found = run_with_test_device(
        f"""
        import json, torch
        from vllm_platform_template.reference_kernels import lora as ops
        gen = torch.Generator().manual_seed(4)
        a = torch.randn({SLOTS}, 1, {RANK}, {HIDDEN}, generator=gen)
        b = torch.randn({SLOTS}, 1, {OUT}, {RANK}, generator=gen)
        x = torch.randn(5, {HIDDEN}, generator=gen)
        batches = [[0, -1, 2, 1, -1], [2, 2, -1, 0, 1], [-1, -1, -1, -1, -1]]

        def expected(slots):
            y = torch.ones(5, {OUT})
            for t, slot in enumerate(slots):
                if slot >= 0:
                    y[t] += (0.5 * x[t] @ a[slot, 0].T) @ b[slot, 0].T
            return y

        dev = dict(device="npu")
        a_d, b_d, x_d = a.to(**dev), b.to(**dev), x.to(**dev)
        indices = torch.tensor(batches[0], **dev)
        buffer = torch.empty(5, {RANK}, **dev)
        y = torch.ones(5, {OUT}, **dev)
        stream, graph = torch.Stream(**dev), torch.accelerator.Graph()
        with stream, graph:
            ops.shrink(x_d, a_d, buffer, indices, 0.5)
            ops.expand(buffer, b_d, y, indices)
        replays = []
        for slots in batches:
            indices.copy_(torch.tensor(slots, **dev))
            y.fill_(1.0)
            graph.replay()
            replays.append(torch.allclose(y.cpu(), expected(slots), atol=1e-5))
        print(json.dumps({{"replays": replays}}))
        """,
        NPU_TEST_DEVICE_NAME="npu",
    )
    assert found["replays"] == [True, True, True]

"""The test device's own kernels (``csrc/kernels.cpp``) keep vLLM's op semantics.

Each kernel (``torch.ops.npu.*``: the library takes the device's name) runs on
``npu`` tensors in a child process with the device and is
compared with the plain-torch semantics: the plugin's reference kernels (vLLM
IR's native ``rms_norm`` and ``fused_add_rms_norm``, ``SiluAndMul``,
``RotaryEmbedding.forward_static``) and ``tests/full_plugin/paged_attention_reference.py``
(the KV write and causal paged attention) - equal, not close: the kernels run
the same arithmetic on the host. Their meta kernels size results under fake
tensors, and a captured ``paged_attention`` reads the batch's lengths when it
replays, so one capture serves every replay (what FULL decode graphs need).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("npu_test_device")

from test_device_child import run_with_test_device

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kernels() -> dict:
    helpers = (str(TESTS), str(TESTS / "full_plugin"))
    path = os.pathsep.join(p for p in (*helpers, os.environ.get("PYTHONPATH")) if p)
    return run_with_test_device(
        """
        import json, torch, npu_test_device as d
        from paged_attention_reference import ref_paged_attention, ref_reshape_and_cache
        from vllm_platform_template.reference_kernels import reference as ref

        ops = torch.ops.npu  # the library named as the device
        gen = torch.Generator().manual_seed(0)

        def randn(*shape, dtype=torch.float32):
            return torch.randn(*shape, generator=gen).to(dtype)

        out = {}
        d.reset_dispatch_counts()
        for dtype in (torch.float32, torch.bfloat16):
            name = str(dtype).removeprefix("torch.")
            x, w, res = randn(5, 64, dtype=dtype), randn(64, dtype=dtype), randn(5, 64, dtype=dtype)
            xd, wd = x.to("npu"), w.to("npu")
            out[f"rms_norm {name}"] = torch.equal(
                ops.rms_norm(xd, wd, 1e-6).cpu(), ref.native_rms_norm(x, w, 1e-6))
            out[f"rms_norm variance_size {name}"] = torch.equal(
                ops.rms_norm(xd, wd, 1e-6, 32).cpu(), ref.native_rms_norm(x, w, 1e-6, 32))
            out[f"rms_norm no weight {name}"] = torch.equal(
                ops.rms_norm(xd, None, 1e-6).cpu(), ref.native_rms_norm(x, None, 1e-6))
            normed, summed = ops.fused_add_rms_norm(xd, res.to("npu"), wd, 1e-6)
            expected = ref.native_fused_add_rms_norm(x, res, w, 1e-6)
            out[f"fused_add_rms_norm {name}"] = (
                torch.equal(normed.cpu(), expected[0]) and torch.equal(summed.cpu(), expected[1]))
            y = randn(3, 2, 48, dtype=dtype)
            out[f"silu_and_mul {name}"] = torch.equal(
                ops.silu_and_mul(y.to("npu")).cpu(), ref.silu_and_mul(y))
            for neox in (True, False):
                tokens, heads, kv_heads, head_size, rotary_dim = 6, 4, 2, 16, 8
                positions = torch.randint(0, 20, (tokens,), generator=gen)
                cache = randn(20, rotary_dim)
                q = randn(tokens, heads * head_size, dtype=dtype)
                k = randn(tokens, kv_heads * head_size, dtype=dtype)
                eq, ek = ref.rotary_embedding(positions, q, k, head_size, cache, neox)
                qd, kd = q.to("npu"), k.to("npu")
                ops.rotary_embedding(positions.to("npu"), qd, kd, head_size, cache.to("npu"), neox)
                out[f"rotary neox={neox} {name}"] = (
                    torch.equal(qd.cpu(), eq) and torch.equal(kd.cpu(), ek))

        blocks, kv_heads, block_size, head_size, heads = 8, 2, 4, 16, 4
        key, value = randn(7, kv_heads, head_size), randn(7, kv_heads, head_size)
        slots = torch.tensor([0, 1, 2, 3, 4, -1, 9])
        k_cache = torch.zeros(blocks, kv_heads, block_size, head_size)
        v_cache = torch.zeros_like(k_cache)
        k_dev, v_dev = k_cache.to("npu"), v_cache.to("npu")
        ref_reshape_and_cache(key, value, k_cache, v_cache, slots)
        ops.reshape_and_cache(key.to("npu"), value.to("npu"), k_dev, v_dev, slots.to("npu"))
        out["reshape_and_cache"] = torch.equal(k_dev.cpu(), k_cache) and torch.equal(
            v_dev.cpu(), v_cache)

        k_cache, v_cache = randn(blocks, kv_heads, block_size, head_size), randn(
            blocks, kv_heads, block_size, head_size)
        k_dev, v_dev = k_cache.to("npu"), v_cache.to("npu")
        table = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32)
        seq_lens = torch.tensor([5, 9], dtype=torch.int32)
        starts = torch.tensor([0, 3, 4], dtype=torch.int32)  # a prefill of 3, a decode
        query = randn(4, heads, head_size)
        output = torch.empty(4, heads, head_size, device="npu")
        ops.paged_attention(output, query.to("npu"), k_dev, v_dev, table.to("npu"),
                            seq_lens.to("npu"), starts.to("npu"), 0.25)
        expected = ref_paged_attention(query, k_cache, v_cache, table, seq_lens, starts, 0.25)
        out["paged_attention"] = torch.equal(output.cpu(), expected)

        # One capture of a decode step, replayed with other lengths written to device memory.
        lens_dev = torch.tensor([5, 9], dtype=torch.int32, device="npu")
        decode_starts = torch.tensor([0, 1, 2], dtype=torch.int32)
        q_dev, table_dev = query[:2].to("npu"), table.to("npu")
        starts_dev = decode_starts.to("npu")
        decoded = torch.empty(2, heads, head_size, device="npu")
        graph = torch.accelerator.Graph()
        with torch.Stream(device="npu"), graph:
            ops.paged_attention(decoded, q_dev, k_dev, v_dev, table_dev, lens_dev, starts_dev, 0.25)
        replays = []
        for lengths in ([5, 9], [3, 12], [1, 2]):
            lens_dev.copy_(torch.tensor(lengths, dtype=torch.int32))
            graph.replay()
            expected = ref_paged_attention(query[:2], k_cache, v_cache, table,
                                           torch.tensor(lengths, dtype=torch.int32),
                                           decode_starts, 0.25)
            replays.append(torch.equal(decoded.cpu(), expected))
        out["captured_attention"] = replays
        out["counts"] = d.dispatch_counts()

        with torch._subclasses.fake_tensor.FakeTensorMode():
            fake = torch.empty(3, 64, device="npu")
            out["fake"] = [list(ops.rms_norm(fake, None, 1e-6).shape),
                           list(ops.silu_and_mul(fake).shape), str(ops.silu_and_mul(fake).device)]
        print(json.dumps(out))
        """,
        PYTHONPATH=path,
    )


def test_each_kernel_equals_vllms_op_semantics(kernels) -> None:
    checked = {
        k: v for k, v in kernels.items() if k not in ("captured_attention", "counts", "fake")
    }
    assert len(checked) == 2 * 7 + 2 and all(checked.values()), checked


def test_each_launch_is_counted_on_the_device(kernels) -> None:
    counts = kernels["counts"]
    assert counts["npu::rms_norm"] == 6 and counts["npu::rotary_embedding"] == 4
    assert counts["npu::paged_attention"] == 2  # one eager launch, one captured
    assert counts["replay:npu::paged_attention"] == 3


def test_a_captured_attention_reads_the_lengths_when_it_replays(kernels) -> None:
    assert kernels["captured_attention"] == [True, True, True]


def test_meta_kernels_size_results_under_fake_tensors(kernels) -> None:
    assert kernels["fake"] == [[3, 64], [3, 32], "npu:0"]

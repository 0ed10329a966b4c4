"""Kernel tests of the hand-fused Llama's ops (``models/llama/ops``).

Each op is checked against its torch reference on the CPU, through the
reference and vLLM's CPU attention kernels. The Triton kernels behind them
(including the fused rotary + KV write, ``rope_and_write_kv``) are tested in
the GPU tier, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from vllm_platform_template.devices.cpu import attention_kernels as cpu_attention
from vllm_platform_template.devices.cpu import vllm_cpu_build
from vllm_platform_template.models.llama.ops import fused_ops, reference
from vllm_platform_template.reference_kernels.paged_attention import (
    reference as attention_reference,
)

torch.manual_seed(0)


def _tolerance(dtype: torch.dtype) -> dict[str, Any]:
    return {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}


@pytest.fixture(scope="module", autouse=True)
def vllm_cpu_kernels() -> None:
    build = vllm_cpu_build.load_cpu_kernels()
    if not build.loaded:
        pytest.skip(f"vLLM's CPU kernels: {build.reason}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 13])
def test_add_rms_norm(dtype: torch.dtype, tokens: int) -> None:
    x, residual = torch.randn(tokens, 256, dtype=dtype), torch.randn(tokens, 256, dtype=dtype)
    weight = torch.randn(256, dtype=dtype)
    want_out, want_residual = reference.add_rms_norm(x, residual, weight, 1e-5)
    out, new_residual = fused_ops.add_rms_norm_(x.clone(), residual.clone(), weight, 1e-5)
    tol = _tolerance(dtype)
    torch.testing.assert_close(out, want_out, **tol)
    torch.testing.assert_close(new_residual, want_residual, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_and_mul(dtype: torch.dtype) -> None:
    gate_up = torch.randn(7, 2 * 96, dtype=dtype)
    torch.testing.assert_close(fused_ops.silu_and_mul(gate_up), reference.silu_and_mul(gate_up))


def _rope_inputs(tokens: int, heads: int, kv_heads: int, head: int, dtype: torch.dtype):
    positions = torch.randint(0, 64, (tokens,))
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head, dtype=dtype)
    q, k, v = qkv.split([heads * head, kv_heads * head, kv_heads * head], dim=-1)
    angles = torch.arange(64, dtype=torch.float32)[:, None] / (
        10000 ** (torch.arange(0, head, 2, dtype=torch.float32) / head)
    )
    cos_sin = torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype)
    return positions, q, k, v, cos_sin


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("path", ["reference", "cpu_kernels"])
def test_rope_and_cache(dtype: torch.dtype, path: str) -> None:
    heads, kv_heads, head, block = 4, 2, 64, 32
    tokens = 10
    positions, q, k, v, cos_sin = _rope_inputs(tokens, heads, kv_heads, head, dtype)
    kv_cache = torch.zeros(4, kv_heads, block, 2 * head, dtype=dtype)
    slots = torch.tensor([3, 4, 5, 40, 41, 42, 70, 71, -1, 100], dtype=torch.int64)
    want_q, want_k = reference.rope_and_cache(
        positions, q.clone(), k.clone(), v, head, cos_sin, True, kv_cache.clone(), slots
    )
    q_out, k_out = q.clone(), k.clone()
    attention = (
        attention_reference.ReferenceAttentionKernels()
        if path == "reference"
        else cpu_attention.CpuAttentionKernels()
    )
    fused_ops.rope_and_cache_(
        positions, q_out, k_out, v, head, cos_sin, True, kv_cache, slots, attention
    )
    tol = _tolerance(dtype)
    torch.testing.assert_close(q_out, want_q, **tol)
    torch.testing.assert_close(k_out, want_k, **tol)
    # Read the cache back through the attention path that owns its layout: attending
    # one query per written slot must reproduce the written values.
    key_cache, value_cache = attention_reference.split_kv_cache(kv_cache)
    if path == "reference":
        written = slots >= 0
        blocks, offsets = slots[written] // block, slots[written] % block
        torch.testing.assert_close(
            value_cache[blocks, :, offsets, :], v[written].view(-1, kv_heads, head)
        )
        torch.testing.assert_close(
            key_cache[blocks, :, offsets, :], want_k[written].view(-1, kv_heads, head), **tol
        )
    else:
        # vLLM's CPU layout is ISA-specific; compare attention outputs instead.
        ref_cache = torch.zeros_like(kv_cache)
        ref_k, ref_v = attention_reference.split_kv_cache(ref_cache)
        attention_reference.reshape_and_cache_(
            want_k.view(-1, kv_heads, head)[:tokens],
            v.reshape(-1, kv_heads, head),
            ref_k,
            ref_v,
            slots,
        )
        query = torch.randn(1, heads, head, dtype=dtype)
        seq_lens = torch.tensor([6], dtype=torch.int32)
        block_table = torch.tensor([[0, 1, 2, 3]], dtype=torch.int32)
        qsl = torch.tensor([0, 1], dtype=torch.int32)
        want = attention_reference.paged_attention(
            query, ref_k, ref_v, torch.empty_like(query), block_table, seq_lens, qsl, 0.125
        )
        isa = cpu_attention.isa_for(dtype, block, head)
        metadata = cpu_attention.scheduler_metadata(
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_size=head,
            dtype=dtype,
            seq_lens=seq_lens,
            query_start_loc=qsl,
            isa=isa,
        )
        got = cpu_attention.paged_attention(
            query,
            key_cache,
            value_cache,
            torch.empty_like(query),
            block_table,
            seq_lens,
            qsl,
            0.125,
            metadata,
        )
        torch.testing.assert_close(got, want, **tol)

"""vLLM's CPU attention kernels, as the CPU reference backend runs them, vs the reference.

Engine-free. Proves that the CPU kernels (each path with its own cache writer:
the CPU kernels use an ISA-specific interior layout) give the reference paged
attention's outputs on prefill, decode and mixed batches, at the head sizes,
block sizes and dtypes they serve (the vec16 ISA and fp16 included); that the
ISA they pick is vLLM's; that a configuration they cannot serve is explained;
and that they refuse the inputs the reference refuses, before touching memory.
"""

from __future__ import annotations

import pytest
import torch
from attention_cases import (
    BAD_ATTENTION_ARGS,
    BATCHES,
    NUM_HEADS,
    NUM_KV_HEADS,
    Batch,
    attention_args,
    make_batch,
    new_kv_cache,
    run_reference,
)

from vllm_platform_template.devices.cpu import attention_kernels as cpu
from vllm_platform_template.devices.cpu import vllm_cpu_build
from vllm_platform_template.reference_kernels.paged_attention import reference

vllm_cpu_build.load_cpu_kernels()  # vLLM's ISA build fills torch.ops._C

CPU_KERNELS_OK, CPU_KERNELS_WHY = cpu.available()
needs_cpu_kernels = pytest.mark.skipif(not CPU_KERNELS_OK, reason=CPU_KERNELS_WHY)
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def run_cpu_kernels(b: Batch, kv_cache: torch.Tensor) -> tuple[torch.Tensor, str]:
    head_size = b.query.shape[-1]
    isa = cpu.isa_for(b.query.dtype, b.block_size, head_size)
    key_cache, value_cache = reference.split_kv_cache(kv_cache)
    cpu.reshape_and_cache_(b.ctx_key, b.ctx_value, key_cache, value_cache, b.ctx_slots, isa)
    cpu.reshape_and_cache_(b.new_key, b.new_value, key_cache, value_cache, b.new_slots, isa)
    metadata = cpu.scheduler_metadata(
        num_heads=NUM_HEADS,
        num_kv_heads=NUM_KV_HEADS,
        head_size=head_size,
        dtype=b.query.dtype,
        seq_lens=b.seq_lens,
        query_start_loc=b.query_start_loc,
        isa=isa,
    )
    n = b.num_tokens
    output = torch.empty_like(b.query[:n])
    cpu.paged_attention(
        b.query[:n],
        key_cache,
        value_cache,
        output,
        b.block_table,
        b.seq_lens,
        b.query_start_loc,
        b.scale,
        metadata,
    )
    return output, isa


@needs_cpu_kernels
@pytest.mark.parametrize("kind", list(BATCHES))
@pytest.mark.parametrize("head_size", [64, 128])
@pytest.mark.parametrize("block_size", [32, 128])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_cpu_kernels_match_reference(
    kind: str, head_size: int, block_size: int, dtype: torch.dtype
) -> None:
    b = make_batch(BATCHES[kind], head_size, block_size, dtype)
    expected = run_reference(b, new_kv_cache(b, dtype))
    actual, _ = run_cpu_kernels(b, new_kv_cache(b, dtype))
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(actual, expected, atol=tol, rtol=tol)


@needs_cpu_kernels
@pytest.mark.parametrize(
    ("head_size", "block_size", "dtype"),
    [(64, 16, torch.float32), (64, 16, torch.bfloat16), (80, 32, torch.float32),
     (128, 32, torch.float16)],
)  # fmt: skip
def test_cpu_kernels_vec16_and_fp16_match_reference(
    head_size: int, block_size: int, dtype: torch.dtype
) -> None:
    b = make_batch(BATCHES["mixed"], head_size, block_size, dtype)
    expected = run_reference(b, new_kv_cache(b, dtype))
    actual, isa = run_cpu_kernels(b, new_kv_cache(b, dtype))
    if head_size % 32 or block_size % 32:
        assert isa in ("vec16", "neon")
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(actual, expected, atol=tol, rtol=tol)


@needs_cpu_kernels
def test_isa_for_matches_vllm() -> None:
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for block_size in (16, 32, 48, 128):
            for head_size in cpu.SUPPORTED_HEAD_SIZES:
                expected = _get_attn_isa(dtype, block_size, head_size, "auto")
                assert cpu.isa_for(dtype, block_size, head_size) == expected


def test_cpu_config_problems_are_explained() -> None:
    assert cpu.config_problem(torch.float32, 128, 64) is None
    assert "head_size 40" in (cpu.config_problem(torch.float32, 128, 40) or "")
    assert "block_size 8" in (cpu.config_problem(torch.float32, 8, 64) or "")
    with pytest.raises(ValueError, match="head_size 40"):
        cpu.isa_for(torch.float32, 128, 40)


def test_cpu_available_reports_reason() -> None:
    ok, reason = cpu.available()
    assert isinstance(ok, bool) and reason


@needs_cpu_kernels
@pytest.mark.parametrize("case", list(BAD_ATTENTION_ARGS))
def test_cpu_attention_rejects_bad_inputs(case: str) -> None:
    mutate, message = BAD_ATTENTION_ARGS[case]
    b = make_batch(BATCHES["mixed"], 64, 32, torch.float32)
    args = attention_args(b, new_kv_cache(b, torch.float32))
    args.update(mutate(args))
    args["scheduler_metadata"] = torch.empty(0, dtype=torch.int8)
    with pytest.raises(ValueError, match=message):
        cpu.paged_attention(**args)

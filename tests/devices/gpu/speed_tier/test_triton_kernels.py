"""Triton kernels on the device against their reference semantics (GPU tier, ``-m gpu``).

The device is the GPU folder's (``devices/gpu/identity.py``). Needs torch with
that device and triton; no vLLM. Skipped (with the reason) without the
device, or when ``TRITON_INTERPRET=1`` is set (the kernels would then be
interpreted on the CPU; ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` is that
tier). Shapes go up to 8192 x 8192 for the row ops and to 4096-key contexts for
attention; fp32/bf16/fp16 throughout.

Tolerances: float32 uses ``torch.testing.assert_close`` defaults. For
bfloat16/float16 row ops the kernels reproduce the native cast order, so almost
every element is bit-identical to the native op; the few that differ are one
ulp apart because float32 sums and ``rsqrt`` round differently. The checks
therefore require >= 99.9% bit-identical elements and the rest within
``atol=1e-2`` and one ulp (``rtol`` 2e-3 for float16, 1.6e-2 for bfloat16,
whose ulp is 2**-7).
"""

from __future__ import annotations

import os

import pytest
import torch
from kernel_cases import (
    ATTENTION_BATCHES,
    ATTENTION_HEADS,
    BLOCK_SIZES,
    DTYPES,
    FORCED_DECODE_SPLITS,
    GELU_APPROXIMATIONS,
    GELU_SHAPES,
    INT8_DTYPES,
    INT8_LINEAR_TOKENS,
    MOE_DTYPES,
    MOE_TOKENS,
    ROTARY_HEADS,
    ROW_SHAPES,
    SILU_SHAPES,
)
from paged_attention_reference import ref_paged_attention, ref_reshape_and_cache, split_kv_cache

from vllm_platform_template.devices.gpu.identity import IDENTITY, torch_module

triton = pytest.importorskip("triton")
DEVICE = IDENTITY.device_type

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {IDENTITY.device_type} device"),
    pytest.mark.skipif(
        os.environ.get("TRITON_INTERPRET") == "1",
        reason="TRITON_INTERPRET=1 would run the kernels in the CPU interpreter",
    ),
]

from vllm_platform_template.devices.gpu.kernels import (  # noqa: E402  # noqa: E402
    activation,
    kv_write,
    layernorm,
    rotary,
)
from vllm_platform_template.devices.gpu.kernels import paged_attention as pa  # noqa: E402
from vllm_platform_template.reference_kernels import reference  # noqa: E402
from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout  # noqa: E402
from vllm_platform_template.reference_kernels.reference import (  # noqa: E402
    native_fused_add_rms_norm,
    native_gelu_and_mul_sparse,
    native_rms_norm,
)

ROW_TOL = {
    torch.float32: {},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2},
    torch.float16: {"atol": 1e-2, "rtol": 2e-3},
}


def _dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _randn(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(*shape, generator=gen, device=DEVICE).to(dtype)


def _assert_close_rows(got: torch.Tensor, expected: torch.Tensor) -> None:
    """Row-op comparison: mostly bit-identical in low precision, rest within one ulp."""
    torch.testing.assert_close(got, expected, **ROW_TOL[got.dtype])
    if got.dtype != torch.float32 and got.numel() >= 1000:
        identical = (got == expected).float().mean().item()
        assert identical >= 0.999, f"only {identical:.5f} of elements bit-identical to native"


# ---------------------------------------------------------------------------
# Reference semantics (vLLM IR native ops; pure-torch paged attention)
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_tf32():
    """Full-precision float32 matmuls in the references."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # no TF32
    yield
    torch.set_float32_matmul_precision(saved)


# ---------------------------------------------------------------------------
# Row ops
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
def test_rms_norm(shape, dtype):
    x = _randn(*shape, dtype=dtype)
    w = _randn(shape[-1], dtype=dtype, seed=1)
    _assert_close_rows(layernorm.rms_norm(x, w, 1e-6), native_rms_norm(x, w, 1e-6))
    if shape[0] <= 128:
        var = shape[-1] // 2 or 1
        _assert_close_rows(
            layernorm.rms_norm(x, None, 1e-5, var), native_rms_norm(x, None, 1e-5, var)
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
def test_fused_add_rms_norm(shape, dtype):
    x = _randn(*shape, dtype=dtype)
    r = _randn(*shape, dtype=dtype, seed=1)
    w = _randn(shape[-1], dtype=dtype, seed=2)
    ex, er = native_fused_add_rms_norm(x, r, w, 1e-6)
    layernorm.fused_add_rms_norm_(x, r, w, 1e-6)
    _assert_close_rows(x, ex)
    torch.testing.assert_close(r, er, rtol=0, atol=0)  # fp32 sum rounded once: exact


def test_row_ops_variants():
    """Weight None, variance_size, strided rows, mixed weight dtype, zero tokens."""
    base = _randn(64, 3000, dtype=torch.bfloat16)
    x = base[:, 100:2148]
    w32 = _randn(2048, seed=1)
    _assert_close_rows(layernorm.rms_norm(x, w32, 1e-6, 1000), native_rms_norm(x, w32, 1e-6, 1000))
    _assert_close_rows(layernorm.rms_norm(x, None, 1e-6), native_rms_norm(x, None, 1e-6))
    r = _randn(64, 2048, dtype=torch.bfloat16, seed=2)
    before = base.clone()
    ex, er = native_fused_add_rms_norm(x, r, None, 1e-6, 512)
    layernorm.fused_add_rms_norm_(x, r, None, 1e-6, 512)
    _assert_close_rows(x, ex)
    torch.testing.assert_close(r, er, rtol=0, atol=0)
    torch.testing.assert_close(base[:, :100], before[:, :100], rtol=0, atol=0)
    torch.testing.assert_close(base[:, 2148:], before[:, 2148:], rtol=0, atol=0)
    empty = torch.empty(0, 4096, device=DEVICE, dtype=torch.bfloat16)
    assert layernorm.rms_norm(empty, None, 1e-6).shape == (0, 4096)
    with pytest.raises(ValueError, match=DEVICE):
        layernorm.rms_norm(torch.randn(2, 8), None, 1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("shape", SILU_SHAPES, ids=str)
def test_silu_and_mul(shape, dtype):
    x = _randn(*shape, dtype=dtype)
    expected = reference.silu_and_mul(x.float()).to(dtype)  # kernel computes in fp32
    torch.testing.assert_close(activation.silu_and_mul(x), expected)
    torch.testing.assert_close(
        activation.silu_and_mul(x), reference.silu_and_mul(x), **ROW_TOL[dtype]
    )


@pytest.mark.parametrize("approximate", GELU_APPROXIMATIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("shape", GELU_SHAPES, ids=str)
def test_gelu_and_mul_sparse(shape, dtype, approximate):
    x = _randn(*shape, dtype=dtype)
    got = activation.gelu_and_mul_sparse(x, 1.6448536, approximate)
    # The native op in the input dtype (its roundings decide which gate elements the
    # sparsity threshold keeps); the kernel reproduces those roundings.
    expected = native_gelu_and_mul_sparse(x, 1.6448536, approximate)
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else ROW_TOL[dtype]
    torch.testing.assert_close(got, expected, **tol)


# ---------------------------------------------------------------------------
# Rotary embedding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("neox", (True, False), ids=("neox", "gptj"))
@pytest.mark.parametrize("heads", ROTARY_HEADS, ids=str)
def test_rotary_embedding(heads, neox, dtype):
    hq, hkv, head_size, rot = heads
    num_tokens = 4096
    positions = torch.randint(0, 8192, (num_tokens,), device=DEVICE)
    cache = _randn(8192, rot, dtype=dtype, seed=3)
    qkv = _randn(num_tokens, (hq + 2 * hkv) * head_size, dtype=dtype)
    q, k, v = qkv.split([hq * head_size, hkv * head_size, hkv * head_size], dim=-1)
    eq, ek = reference.rotary_embedding(
        positions, q.float(), k.float(), head_size, cache.float(), neox
    )
    eq, ek = eq.to(dtype), ek.to(dtype)
    v_before = v.clone()
    kv_cache = torch.full(
        (num_tokens // 16 + 4, hkv, 16, 2 * head_size), float("nan"), device=DEVICE, dtype=dtype
    )
    key_cache, value_cache = split_kv_cache(kv_cache)
    # Every token is rotated; the last 2 are padding rows the cache write skips.
    slots = torch.randperm(kv_cache.shape[0] * 16, device=DEVICE)[: num_tokens - 2]
    slots[::7] = -1
    rotary.rotary_embedding_and_cache_(
        positions, q, k, v, head_size, cache, neox, key_cache, value_cache, slots
    )
    torch.testing.assert_close(q, eq)
    torch.testing.assert_close(k, ek)
    torch.testing.assert_close(v, v_before, rtol=0, atol=0)
    expected = torch.full_like(kv_cache, float("nan"))
    exp_k, exp_v = split_kv_cache(expected)
    ref_reshape_and_cache(
        k.view(num_tokens, hkv, head_size), v.view(num_tokens, hkv, head_size), exp_k, exp_v, slots
    )
    torch.testing.assert_close(kv_cache, expected, rtol=0, atol=0, equal_nan=True)
    # Plain rotation, key None.
    q2 = _randn(num_tokens, hq * head_size, dtype=dtype, seed=5)
    eq2, _ = reference.rotary_embedding(positions, q2.float(), None, head_size, cache.float(), neox)
    rotary.rotary_embedding_(positions, q2, None, head_size, cache, neox)
    torch.testing.assert_close(q2, eq2.to(dtype))


# ---------------------------------------------------------------------------
# KV cache write and paged attention
# ---------------------------------------------------------------------------


def test_one_launch_serves_each_dtype_with_its_own_kernel():
    """The KV-write launch is shared by shapes, not dtypes: a bf16 kernel must never
    write a float32 cache (same strides in elements, another compiled kernel)."""
    for dtype in (torch.bfloat16, torch.float32, torch.float16):
        kv_cache = torch.zeros(4, 2, 16, 2 * 64, device=DEVICE, dtype=dtype)
        key_cache, value_cache = split_kv_cache(kv_cache)
        expected = kv_cache.clone()
        exp_k, exp_v = split_kv_cache(expected)
        key = _randn(5, 2, 64, dtype=dtype, seed=7)
        slots = torch.tensor([3, 17, -1, 40, 63], device=DEVICE)
        kv_write.write_kv_unchecked(key, key, key_cache, value_cache, slots)
        ref_reshape_and_cache(key, key, exp_k, exp_v, slots)
        torch.testing.assert_close(kv_cache, expected, rtol=0, atol=0)


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
def test_reshape_and_cache(dtype, block_size):
    num_tokens, hkv, head_size, num_blocks = 3000, 8, 128, 256
    kv_cache = torch.full(
        (num_blocks, hkv, block_size, 2 * head_size), float("nan"), device=DEVICE, dtype=dtype
    )
    key_cache, value_cache = split_kv_cache(kv_cache)
    expected = kv_cache.clone()
    exp_k, exp_v = split_kv_cache(expected)
    # Fewer slots than key rows: the last 16 rows are padding, not written.
    slots = torch.randperm(num_blocks * block_size, device=DEVICE)[: num_tokens - 16]
    slots[::5] = -1
    key = _randn(num_tokens, hkv, head_size, dtype=dtype)
    value = _randn(num_tokens, hkv, head_size, dtype=dtype, seed=1)
    kv_write.reshape_and_cache_(key, value, key_cache, value_cache, slots)
    ref_reshape_and_cache(key, value, exp_k, exp_v, slots)
    torch.testing.assert_close(kv_cache, expected, rtol=0, atol=0, equal_nan=True)


def _paged_batch(q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size, dtype, seed=0):
    """Caches full of NaN except the requests' tokens; unused table entries hit a NaN block."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    blocks_per_req = [(s + block_size - 1) // block_size for s in seq_lens]
    num_blocks = sum(blocks_per_req) + 2
    kv_cache = torch.full(
        (num_blocks, num_kv_heads, block_size, 2 * head_size),
        float("nan"),
        device=DEVICE,
        dtype=dtype,
    )
    key_cache, value_cache = split_kv_cache(kv_cache)
    perm = torch.randperm(num_blocks, generator=gen, device=DEVICE)
    block_table = torch.empty(
        len(seq_lens), max(blocks_per_req) + 2, dtype=torch.int32, device=DEVICE
    )
    used = 0
    for r, nb in enumerate(blocks_per_req):
        block_table[r, :nb] = perm[used : used + nb].to(torch.int32)
        block_table[r, nb:] = perm[-1]
        used += nb
    for r, seq_len in enumerate(seq_lens):
        pos = torch.arange(seq_len, device=DEVICE)
        slots = block_table[r, pos // block_size].to(torch.int64) * block_size + pos % block_size
        k = torch.randn(seq_len, num_kv_heads, head_size, generator=gen, device=DEVICE).to(dtype)
        v = torch.randn(seq_len, num_kv_heads, head_size, generator=gen, device=DEVICE).to(dtype)
        ref_reshape_and_cache(k, v, key_cache, value_cache, slots)
    query = torch.randn(sum(q_lens), num_heads, head_size, generator=gen, device=DEVICE).to(dtype)
    cum = torch.tensor([0, *q_lens], device=DEVICE).cumsum(0)
    return {
        "query": query,
        "key_cache": key_cache,
        "value_cache": value_cache,
        "block_table": block_table,
        "seq_lens": torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE),
        "query_start_loc": cum.to(torch.int32),
    }


ATTN_TOL = {
    torch.float32: {"atol": 2e-5, "rtol": 1e-5},
    torch.bfloat16: {"atol": 1.5e-2, "rtol": 1.5e-2},
    torch.float16: {"atol": 3e-3, "rtol": 3e-3},
}


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("heads", ATTENTION_HEADS, ids=str)
@pytest.mark.parametrize("kind", sorted(ATTENTION_BATCHES))
def test_paged_attention(kind, heads, block_size, dtype):
    q_lens, seq_lens = ATTENTION_BATCHES[kind]
    hq, hkv, head_size = heads
    batch = _paged_batch(q_lens, seq_lens, hq, hkv, head_size, block_size, dtype)
    query = batch["query"]
    output = torch.full_like(query, float("nan"))
    args = (batch["key_cache"], batch["value_cache"])
    meta = (batch["block_table"], batch["seq_lens"], batch["query_start_loc"])
    pa.paged_attention(query, *args, output, *meta, head_size**-0.5, max(q_lens))
    expected = ref_paged_attention(query, *args, *meta, head_size**-0.5)
    torch.testing.assert_close(output, expected, **ATTN_TOL[dtype])
    if max(q_lens) == 1:
        for splits in FORCED_DECODE_SPLITS:
            output.fill_(float("nan"))
            pa.paged_attention(
                query, *args, output, *meta, head_size**-0.5, 1, decode_splits=splits
            )
            torch.testing.assert_close(output, expected, **ATTN_TOL[dtype])


NUM_LAYERS = 16


def _layers_step(planner, plan, layers, batch, tokens):
    """KV write + attention of every layer, as TEMPLATE_ATTN's impl runs them."""
    for key_cache, value_cache, output in layers:
        kv_write.write_kv_unchecked(
            tokens["key"], tokens["value"], key_cache, value_cache, batch["slots"]
        )
        pa.attend_unchecked(
            tokens["query"],
            key_cache,
            value_cache,
            output,
            batch["block_table"],
            batch["seq_lens"],
            batch["query_start_loc"],
            tokens["scale"],
            plan,
        )


def _fill_decode_batch(batch, lengths, num_reqs_padded, block_size, seed):
    """Write a padded decode batch into the persistent buffers, as vLLM's runner does:
    real requests first, padding requests with no token (seq_len 0), padding slots -1."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    num_blocks = batch["num_blocks"]
    batch["block_table"].zero_()
    batch["slots"].fill_(-1)
    batch["seq_lens"].zero_()
    qsl = torch.full((num_reqs_padded + 1,), len(lengths), dtype=torch.int32)
    qsl[: len(lengths) + 1] = torch.arange(len(lengths) + 1, dtype=torch.int32)
    batch["query_start_loc"].copy_(qsl)
    per_req = batch["block_table"].shape[1]
    for r, length in enumerate(lengths):
        blocks = torch.randperm(num_blocks, generator=gen)[
            : (length + block_size - 1) // block_size
        ]
        batch["block_table"][r, : len(blocks)] = blocks.to(torch.int32).to(DEVICE)
        assert len(blocks) <= per_req
        batch["seq_lens"][r] = length
        last = length - 1  # the new token's slot
        batch["slots"][r] = int(blocks[last // block_size]) * block_size + last % block_size


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float32), ids=_dtype_id)
def test_captured_layers_replay_like_eager_and_the_reference(dtype):
    """16 layers of KV write + attention captured once on a padded decode batch.

    Then seq_lens, block tables and slots change in place (longer contexts too,
    fewer real requests): the replay equals an eager run of the same plan bit for
    bit, and the reference within tolerance; the padded request's output row and
    the cache slots no request owns stay untouched.
    """
    hq, hkv, head_size, block_size, max_reqs = 32, 8, 128, 16, 8
    layout = AttentionLayout(hq, hkv, head_size, dtype, block_size)
    planner = pa.TritonAttentionPlanner(layout, max_reqs, torch.device(DEVICE, 0))
    num_blocks, blocks_per_req = 2048, 256  # contexts up to 4096 keys
    kv_caches = [
        _randn(num_blocks, hkv, block_size, 2 * head_size, dtype=dtype, seed=i)
        for i in range(NUM_LAYERS)
    ]
    outputs = [torch.zeros(4, hq, head_size, device=DEVICE, dtype=dtype) for _ in kv_caches]
    layers = [(*split_kv_cache(c), o) for c, o in zip(kv_caches, outputs, strict=True)]
    batch = {
        "num_blocks": num_blocks,
        "block_table": torch.zeros(4, blocks_per_req, dtype=torch.int32, device=DEVICE),
        "seq_lens": torch.zeros(4, dtype=torch.int32, device=DEVICE),
        "query_start_loc": torch.zeros(5, dtype=torch.int32, device=DEVICE),
        "slots": torch.full((4,), -1, dtype=torch.int64, device=DEVICE),
    }
    tokens = {
        "query": _randn(4, hq, head_size, dtype=dtype, seed=100),
        "key": _randn(4, hkv, head_size, dtype=dtype, seed=101),
        "value": _randn(4, hkv, head_size, dtype=dtype, seed=102),
        "scale": head_size**-0.5,
    }
    plan = planner.plan(num_reqs=4, num_tokens=4, max_query_len=1)
    assert plan.num_splits > 1  # the merge is in the graph too
    _fill_decode_batch(batch, (5, 17, 3), 4, block_size, seed=0)
    _layers_step(planner, plan, layers, batch, tokens)  # warm (compiles, outside capture)
    module = torch_module()
    stream = module.Stream()
    stream.wait_stream(module.current_stream())
    graph = getattr(module, IDENTITY.graph_api)()
    with module.graph(graph, stream=stream):
        _layers_step(planner, plan, layers, batch, tokens)
    module.synchronize()
    for seed, lengths in ((1, (4000, 700, 1)), (2, (33, 4096)), (3, (2049, 1, 300))):
        _fill_decode_batch(batch, lengths, 4, block_size, seed)
        before = [c.clone() for c in kv_caches]
        for o in outputs:
            o.fill_(float("nan"))
        graph.replay()
        module.synchronize()
        replayed = [o.clone() for o in outputs]
        written = [c.clone() for c in kv_caches]
        for c, b in zip(kv_caches, before, strict=True):
            c.copy_(b)
        for o in outputs:
            o.fill_(float("nan"))
        _layers_step(planner, plan, layers, batch, tokens)
        module.synchronize()
        n = len(lengths)
        for layer, (key_cache, value_cache, output) in enumerate(layers):
            assert torch.equal(replayed[layer][:n], output[:n]), f"layer {layer}: replay != eager"
            assert torch.isnan(replayed[layer][n:]).all(), "a padding row was written"
            torch.testing.assert_close(written[layer], kv_caches[layer], rtol=0, atol=0)
            expected = ref_paged_attention(
                tokens["query"][:n],
                key_cache,
                value_cache,
                batch["block_table"][:n],
                batch["seq_lens"][:n],
                batch["query_start_loc"][: n + 1],
                tokens["scale"],
            )
            torch.testing.assert_close(replayed[layer][:n], expected, **ATTN_TOL[dtype])
        changed = (written[0] != before[0]).flatten(1).any(1).nonzero().flatten().tolist()
        owned = {
            int(batch["block_table"][r, (length - 1) // block_size])
            for r, length in enumerate(lengths)
        }
        assert set(changed) <= owned, "the KV write touched a block no request owns"


class _NoJitLaunch:
    def __getitem__(self, grid):
        raise AssertionError("Launch went through Triton's JIT for a launch it had seen")


def test_planned_launches_go_through_the_compiled_launcher():
    """The second launch of a plan skips Triton's binding (``launch.Launch``) and matches."""
    batch = _paged_batch((1, 1, 1), (900, 20, 3000), 32, 8, 128, 16, torch.bfloat16)
    layout = AttentionLayout(32, 8, 128, torch.bfloat16, 16)
    planner = pa.TritonAttentionPlanner(layout, 4, torch.device(DEVICE, 0))
    plan = planner.plan(num_reqs=3, num_tokens=3, max_query_len=1)
    args = (batch["key_cache"], batch["value_cache"])
    meta = (batch["block_table"], batch["seq_lens"], batch["query_start_loc"], 128**-0.5)
    first = torch.empty_like(batch["query"])
    known = len(plan.attention._compiled)  # what earlier launches of this plan kept
    pa.attend_unchecked(batch["query"], *args, first, *meta, plan)
    assert len(plan.attention._compiled) == known + 1  # Triton launched it, and it is kept
    second = torch.empty_like(batch["query"])
    jit = plan.attention.kernel
    plan.attention.kernel = _NoJitLaunch()  # the second launch must not reach Triton's JIT
    pa.attend_unchecked(batch["query"], *args, second, *meta, plan)
    plan.attention.kernel = jit
    torch_module().synchronize()
    assert torch.equal(first, second)
    expected = ref_paged_attention(batch["query"], *args, *meta)
    torch.testing.assert_close(second, expected, **ATTN_TOL[torch.bfloat16])
    # A view at an odd address is another specialization: Triton launches it, every time.
    odd = torch.empty(batch["query"].numel() + 1, device=DEVICE, dtype=torch.bfloat16)
    odd_query = odd[1:].view_as(batch["query"]).copy_(batch["query"])
    third = torch.empty_like(batch["query"])
    pa.attend_unchecked(odd_query, *args, third, *meta, plan)
    assert len(plan.attention._compiled) == known + 1
    torch_module().synchronize()
    torch.testing.assert_close(third, expected, **ATTN_TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", INT8_DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("m", INT8_LINEAR_TOKENS)
def test_int8_linear_matches_the_reference(m: int, dtype: torch.dtype) -> None:
    """The int8 tensor-core GEMM against the reference (exact int32 sums, one rounding);
    the per-token quantization bit for bit (libdevice's round-half-even)."""
    from vllm_platform_template.devices.gpu.kernels import int8_linear
    from vllm_platform_template.reference_kernels import int8_linear as ref_int8

    gen = torch.Generator().manual_seed(m)
    k, n = 4096, 1536
    x = torch.randn(m, k, generator=gen).to(dtype)
    weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
    scale = torch.rand(n, generator=gen) / 200
    bias = torch.randn(n, generator=gen).to(dtype)
    q, x_scale = int8_linear.per_token_quant_int8(x.to(DEVICE))
    want_q, want_scale = ref_int8.per_token_quant_int8(x)
    assert torch.equal(q.cpu(), want_q) and torch.equal(x_scale.cpu(), want_scale)
    got = int8_linear.w8a8_int8_linear(
        x.to(DEVICE), weight.to(DEVICE), scale.to(DEVICE), bias.to(DEVICE)
    )
    want = ref_int8.w8a8_int8_linear(x, weight, scale, bias)
    torch.testing.assert_close(
        got.cpu(), want, **({} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 1.6e-2})
    )


@pytest.mark.parametrize("dtype", MOE_DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("tokens", MOE_TOKENS)
def test_fused_moe_matches_the_reference(tokens: int, dtype: torch.dtype) -> None:
    """Mixtral's expert shape (8 experts, top-2) cut to 1024 x 512 per expert."""
    from vllm_platform_template.devices.gpu.kernels import fused_moe
    from vllm_platform_template.reference_kernels import fused_moe as ref_moe

    gen = torch.Generator().manual_seed(tokens)
    experts, hidden, inter = 8, 1024, 512
    x = torch.randn(tokens, hidden, generator=gen).to(dtype)
    logits = torch.randn(tokens, experts, generator=gen)
    w13 = (torch.randn(experts, 2 * inter, hidden, generator=gen) / 32).to(dtype)
    w2 = (torch.randn(experts, hidden, inter, generator=gen) / 32).to(dtype)
    on = [t.to(DEVICE) for t in (x, logits, w13, w2)]
    got = fused_moe.fused_moe(*on, 2, True)
    want = ref_moe.fused_moe(*on, 2, True)
    tolerance = (
        {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    )
    torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.parametrize("dtype", MOE_DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("tokens", MOE_TOKENS)
def test_fused_moe_w8a8_int8_matches_the_reference(tokens: int, dtype: torch.dtype) -> None:
    """INT8 experts at the same shape: the products are exact int32 sums on both sides;
    what differs is the rounding of the SiLU-gated rows before their quantization and of
    the output dtype. The reference runs on the CPU (torch has no int32 GEMM on the
    device) as the CPU kernel, which equals it bit for bit (tests/full_plugin/test_fused_moe.py)
    and sums with oneDNN's int8 GEMM instead of a plain int32 one."""
    from vllm_platform_template.devices.cpu.kernels import fused_moe_w8a8_int8 as reference
    from vllm_platform_template.devices.gpu.kernels import fused_moe

    gen = torch.Generator().manual_seed(tokens)
    experts, hidden, inter = 8, 1024, 512
    x = torch.randn(tokens, hidden, generator=gen).to(dtype)
    logits = torch.randn(tokens, experts, generator=gen)
    w13 = torch.randint(-127, 128, (experts, 2 * inter, hidden), dtype=torch.int8, generator=gen)
    w2 = torch.randint(-127, 128, (experts, hidden, inter), dtype=torch.int8, generator=gen)
    w13_scale = torch.rand(experts, 2 * inter, generator=gen) / 2000
    w2_scale = torch.rand(experts, hidden, generator=gen) / 2000
    args = (x, logits, w13, w13_scale, w2, w2_scale)
    got = fused_moe.fused_moe_w8a8_int8(*(t.to(DEVICE) for t in args), 2, True).cpu().float()
    want = reference(*args, 2, True).float()
    scale = float(want.abs().max())
    tolerance = (
        {"atol": 1e-4 * scale, "rtol": 1e-4}
        if dtype == torch.float32
        else {"atol": 4e-2 * scale, "rtol": 2e-2}
    )
    torch.testing.assert_close(got, want, **tolerance)

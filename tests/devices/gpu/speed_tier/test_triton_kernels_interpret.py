"""Triton kernels on the CPU through Triton's interpreter (``TRITON_INTERPRET=1``).

Why a child process. Triton reads ``TRITON_INTERPRET`` when ``@triton.jit``
wraps a kernel, i.e. when a kernel module is imported, not when a kernel is
launched (Triton 3.9: ``triton.jit`` checks ``triton.knobs.runtime.interpret``
and returns an ``InterpretedFunction``; Triton 3.6 does the same). Setting the
variable inside the pytest process is therefore unreliable both ways: a kernel
module imported earlier by another test keeps its compiled kernels (which cannot
launch on CPU tensors), and the variable would leak into later tests (the GPU
tier, collected in the same session on a GPU machine, would import interpreted
kernels). So this module runs its ``check_*`` functions in one child Python
process started with ``TRITON_INTERPRET=1``: the child runs this file as a
script, imports the kernels fresh, runs the named checks and prints one JSON
report; each check becomes one pytest test here (a skip or failure in the child
is re-raised with its message and traceback).

Interpreter limits seen on Triton 3.9, and how the checks live with them:

- float32 -> bfloat16 casts truncate instead of rounding to nearest even, so
  bfloat16 results are compared with a tolerance of a couple of ulps.
- ``tl.dot`` on bfloat16 operands multiplies their raw bits, so bfloat16
  attention is skipped here (float16 covers the low-precision path; the GPU tier
  ``tests/devices/gpu/speed_tier/test_triton_kernels.py`` covers bfloat16).
- ``block_mask & scalar_condition`` is mis-typed, so the kernels broadcast
  scalar conditions to blocks before combining them with masks.

Everything runs on small shapes in float32 (plus float16/bfloat16 where the
interpreter is exact enough); the whole module takes well under a minute on
two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from paged_attention_reference import ref_paged_attention, ref_reshape_and_cache, split_kv_cache

from vllm_platform_template.reference_kernels.reference import (  # torch only, no kernels
    native_fused_add_rms_norm,
    native_gelu_and_mul_sparse,
    native_rms_norm,
)

# The parent process must not import the kernel modules (nor anything that
# imports them): only the child, started with TRITON_INTERPRET=1, does.

REPORT_MARK = "TRITON_INTERPRET_REPORT "
CHILD_TIMEOUT_S = 300
REPO_ROOT = Path(__file__).resolve().parents[4]
# the package and the test helpers, for the child process
HELPER_PATHS = (str(REPO_ROOT), str(REPO_ROOT / "tests"), str(REPO_ROOT / "tests" / "full_plugin"))

# ---------------------------------------------------------------------------
# Helpers of the checks
# ---------------------------------------------------------------------------

LOW_PRECISION_TOL = {
    # Interpreter truncates fp32 -> bf16: allow about two bf16 ulps.
    "bfloat16": {"atol": 1e-2, "rtol": 1.6e-2},
    "float16": {"atol": 1e-3, "rtol": 2e-3},
    "float32": {},
}


def _tol(dtype) -> dict:
    return LOW_PRECISION_TOL[str(dtype).removeprefix("torch.")]


def _gen(seed: int = 0):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=None, seed: int = 0):
    t = torch.randn(*shape, generator=_gen(seed))
    return t.to(dtype) if dtype is not None else t


def _expect_value_error(fn: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fn()


def _paged_batch(q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size, dtype, seed=0):
    """A batch whose caches hold NaN everywhere except the requests' tokens.

    Each request's unused block-table entries point at a NaN-only block, and the
    tail of each request's last block is NaN too: a kernel that reads any key
    it must not see produces NaN.
    """
    gen = _gen(seed)
    blocks_per_req = [(s + block_size - 1) // block_size for s in seq_lens]
    num_blocks = sum(blocks_per_req) + 2
    kv_cache = torch.full(
        (num_blocks, num_kv_heads, block_size, 2 * head_size), float("nan"), dtype=dtype
    )
    key_cache, value_cache = split_kv_cache(kv_cache)
    perm = torch.randperm(num_blocks, generator=gen)
    block_table = torch.empty(len(seq_lens), max(blocks_per_req) + 2, dtype=torch.int32)
    used = 0
    for r, nb in enumerate(blocks_per_req):
        block_table[r, :nb] = perm[used : used + nb].to(torch.int32)
        block_table[r, nb:] = perm[-1]  # a stale block, never written
        used += nb
    new_kv = []  # each request's new tokens' keys and values, as the step holds them
    for r, (q_len, seq_len) in enumerate(zip(q_lens, seq_lens, strict=True)):
        pos = torch.arange(seq_len)
        slots = block_table[r, pos // block_size].to(torch.int64) * block_size + pos % block_size
        k = torch.randn(seq_len, num_kv_heads, head_size, generator=gen).to(dtype)
        v = torch.randn(seq_len, num_kv_heads, head_size, generator=gen).to(dtype)
        ref_reshape_and_cache(k, v, key_cache, value_cache, slots)
        new_kv.append(torch.cat([k[seq_len - q_len :], v[seq_len - q_len :]], dim=1))
    # one [T, 2 * Hkv, D] tensor split as vLLM splits its qkv projection: strided views
    key, value = torch.cat(new_kv).split([num_kv_heads, num_kv_heads], dim=1)
    query = torch.randn(sum(q_lens), num_heads, head_size, generator=gen).to(dtype)
    query_start_loc = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    return {
        "query": query,
        "key": key,
        "value": value,
        "kv_cache": kv_cache,
        "key_cache": key_cache,
        "value_cache": value_cache,
        "block_table": block_table,
        "seq_lens": torch.tensor(seq_lens, dtype=torch.int32),
        "query_start_loc": query_start_loc,
    }


def _run_attention(batch, max_query_len, decode_splits=None):
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa

    query = batch["query"]
    output = torch.full_like(query, float("nan"))
    pa.paged_attention(
        query,
        batch["key_cache"],
        batch["value_cache"],
        output,
        batch["block_table"],
        batch["seq_lens"],
        batch["query_start_loc"],
        query.shape[-1] ** -0.5,
        max_query_len,
        decode_splits=decode_splits,
    )
    return output


def _ref_attention(batch):
    query = batch["query"]
    return ref_paged_attention(
        query,
        batch["key_cache"],
        batch["value_cache"],
        batch["block_table"],
        batch["seq_lens"],
        batch["query_start_loc"],
        query.shape[-1] ** -0.5,
    )


# ---------------------------------------------------------------------------
# Checks (run in the interpreter child; each is one pytest test in the parent)
# ---------------------------------------------------------------------------


def check_kernels_are_interpreted() -> None:
    from vllm_platform_template.devices.gpu.kernels import is_interpreted, layernorm

    assert os.environ.get("TRITON_INTERPRET") == "1"
    assert is_interpreted(layernorm._rms_norm_kernel)


def check_rms_norm_fp32_sizes_weight_and_variance_size() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import rms_norm

    for hidden in (1, 7, 96, 300, 1000, 2048):
        for with_weight in (True, False):
            for variance_size in (None, max(1, hidden // 3)):
                x = _randn(13, hidden, seed=hidden)
                w = _randn(hidden, seed=1) if with_weight else None
                torch.testing.assert_close(
                    rms_norm(x, w, 1e-6, variance_size), native_rms_norm(x, w, 1e-6, variance_size)
                )


def check_rms_norm_low_precision_and_mixed_weight_dtype() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import rms_norm

    for dtype in (torch.bfloat16, torch.float16):
        for w_dtype in (dtype, torch.float32):
            x = _randn(9, 300, dtype=dtype)
            w = _randn(300, dtype=w_dtype, seed=1)
            got = rms_norm(x, w, 1e-5, None)
            assert got.dtype == dtype
            torch.testing.assert_close(got, native_rms_norm(x, w, 1e-5), **_tol(dtype))
    x = _randn(5, 64)
    w = _randn(64, dtype=torch.bfloat16, seed=1)  # fp32 x, bf16 weight: rounds through bf16
    torch.testing.assert_close(rms_norm(x, w, 1e-6), native_rms_norm(x, w, 1e-6), **_tol(w.dtype))


def check_rms_norm_strided_rows_and_nd() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import rms_norm

    base = _randn(11, 200)
    x = base[:, :150]  # row stride 200, last dim contiguous
    w = _randn(150, seed=1)
    got = rms_norm(x, w, 1e-6, 100)
    assert got.is_contiguous()
    torch.testing.assert_close(got, native_rms_norm(x, w, 1e-6, 100))
    x3 = _randn(2, 3, 7, 64)[:, :, 1:5]  # leading dims not collapsible: copied once
    torch.testing.assert_close(rms_norm(x3, None, 1e-6), native_rms_norm(x3, None, 1e-6))
    x1 = _randn(40)
    torch.testing.assert_close(rms_norm(x1, None, 1e-6), native_rms_norm(x1, None, 1e-6))


def check_rms_norm_zero_tokens() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import fused_add_rms_norm_, rms_norm

    x = torch.empty(0, 64)
    assert rms_norm(x, torch.ones(64), 1e-6).shape == (0, 64)
    r = torch.empty(0, 64)
    out_x, out_r = fused_add_rms_norm_(x, r, None, 1e-6)
    assert out_x is x and out_r is r


def check_rms_norm_multi_pass() -> None:
    from vllm_platform_template.devices.gpu.kernels import layernorm

    saved = layernorm.MAX_SINGLE_PASS_BLOCK, layernorm.MULTI_PASS_BLOCK
    layernorm.MAX_SINGLE_PASS_BLOCK, layernorm.MULTI_PASS_BLOCK = 64, 32
    try:
        assert not layernorm.row_launch_config(300).single_pass
        x, r, w = _randn(6, 300), _randn(6, 300, seed=1), _randn(300, seed=2)
        for variance_size in (None, 77):
            torch.testing.assert_close(
                layernorm.rms_norm(x, w, 1e-6, variance_size),
                native_rms_norm(x, w, 1e-6, variance_size),
            )
            xx, rr = x.clone(), r.clone()
            layernorm.fused_add_rms_norm_(xx, rr, w, 1e-6, variance_size)
            ex, er = native_fused_add_rms_norm(x, r, w, 1e-6, variance_size)
            torch.testing.assert_close(xx, ex)
            torch.testing.assert_close(rr, er)
    finally:
        layernorm.MAX_SINGLE_PASS_BLOCK, layernorm.MULTI_PASS_BLOCK = saved


def check_fused_add_rms_norm_in_place() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import fused_add_rms_norm_

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for hidden, variance_size, with_weight in (
            (96, None, True),
            (300, 128, False),
            (5, 3, True),
        ):
            x = _randn(17, hidden, dtype=dtype)
            r = _randn(17, hidden, dtype=dtype, seed=1)
            w = _randn(hidden, dtype=dtype, seed=2) if with_weight else None
            ex, er = native_fused_add_rms_norm(x, r, w, 1e-6, variance_size)
            xx, rr = x.clone(), r.clone()
            out_x, out_r = fused_add_rms_norm_(xx, rr, w, 1e-6, variance_size)
            assert out_x is xx and out_r is rr
            torch.testing.assert_close(xx, ex, **_tol(dtype))
            torch.testing.assert_close(rr, er, **_tol(dtype))


def check_fused_add_rms_norm_strided_rows() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import fused_add_rms_norm_

    xbase, rbase = _randn(9, 160), _randn(9, 130, seed=1)
    x, r = xbase[:, 10:138], rbase[:, :128]
    w = _randn(128, seed=2)
    ex, er = native_fused_add_rms_norm(x, r, w, 1e-6)
    untouched = xbase[:, :10].clone(), xbase[:, 138:].clone(), rbase[:, 128:].clone()
    fused_add_rms_norm_(x, r, w, 1e-6)
    torch.testing.assert_close(x, ex)
    torch.testing.assert_close(r, er)
    torch.testing.assert_close(xbase[:, :10], untouched[0], rtol=0, atol=0)
    torch.testing.assert_close(xbase[:, 138:], untouched[1], rtol=0, atol=0)
    torch.testing.assert_close(rbase[:, 128:], untouched[2], rtol=0, atol=0)


def check_ir_kernels_as_torch_operators() -> None:
    """The IR kernels' torch operators: same results, and traceable with fake
    tensors (as vLLM's IR lowering traces a provider) into one opaque node each."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from vllm_platform_template.devices.gpu.kernels import torch_ops

    x, r, w, g = _randn(6, 64), _randn(6, 64, seed=1), _randn(64, seed=2), _randn(6, 128, seed=3)
    torch.testing.assert_close(torch_ops.rms_norm(x, w, 1e-6, 32), native_rms_norm(x, w, 1e-6, 32))
    ex, er = native_fused_add_rms_norm(x, r, w, 1e-6)
    xx, rr = x.clone(), r.clone()
    out_x, out_r = torch_ops.fused_add_rms_norm_(xx, rr, w, 1e-6)
    assert out_x is xx and out_r is rr
    torch.testing.assert_close(xx, ex)
    torch.testing.assert_close(rr, er)
    torch.testing.assert_close(
        torch_ops.gelu_and_mul_sparse(g, 0.5, "tanh"),
        native_gelu_and_mul_sparse(g, 0.5, "tanh"),
        atol=1e-5,
        rtol=1e-5,
    )

    def body(x, r, w, g):
        y = torch_ops.rms_norm(x, w, 1e-6)
        torch_ops.fused_add_rms_norm_(y, r, w, 1e-6)
        return y, torch_ops.gelu_and_mul_sparse(g, 1.0)

    graph = make_fx(body, tracing_mode="fake")(x, r, w, g)
    ops = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    ns = torch_ops.NAMESPACE
    names = ("rms_norm", "fused_add_rms_norm_", "gelu_and_mul_sparse")
    expected = {f"{ns}.{op}.default" for op in names}
    assert expected <= ops, ops
    y, h = graph(x, r.clone(), w, g)
    assert y.shape == x.shape and h.shape == (6, 64)


def check_layernorm_rejects_bad_inputs() -> None:
    from vllm_platform_template.devices.gpu.kernels.layernorm import fused_add_rms_norm_, rms_norm

    x = _randn(4, 8)
    _expect_value_error(lambda: rms_norm(x.to(torch.int32), None, 1e-6), "dtype")
    _expect_value_error(lambda: rms_norm(x, torch.ones(9), 1e-6), "weight has shape")
    _expect_value_error(lambda: rms_norm(x, None, 1e-6, 9), "variance_size")
    _expect_value_error(lambda: rms_norm(x.t(), None, 1e-6), "contiguous last dimension")
    _expect_value_error(lambda: fused_add_rms_norm_(x, _randn(4, 9), None, 1e-6), "residual")
    _expect_value_error(lambda: fused_add_rms_norm_(x, x.half(), None, 1e-6), "residual")
    _expect_value_error(lambda: fused_add_rms_norm_(x, x, None, 1e-6), "share memory")
    x3 = _randn(2, 3, 7, 8)[:, :, 1:5]
    _expect_value_error(
        lambda: fused_add_rms_norm_(x3, torch.zeros_like(x3), None, 1e-6), "in place"
    )


def check_silu_and_mul() -> None:
    from vllm_platform_template.devices.gpu.kernels import activation
    from vllm_platform_template.reference_kernels import reference

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for shape in ((7, 2 * 13), (3, 5, 2 * 64), (2, 2 * 3000)):
            x = _randn(*shape, dtype=dtype)
            # fp32 math inside: compare with the reference on upcast inputs.
            expected = reference.silu_and_mul(x.float()).to(dtype)
            torch.testing.assert_close(activation.silu_and_mul(x), expected, **_tol(dtype))
    x = _randn(6, 300)[:, :200]  # strided rows
    torch.testing.assert_close(activation.silu_and_mul(x), reference.silu_and_mul(x))
    assert activation.silu_and_mul(torch.empty(0, 8)).shape == (0, 4)
    _expect_value_error(lambda: activation.silu_and_mul(_randn(3, 7)), "even")


def check_gelu_and_mul_sparse() -> None:
    from vllm_platform_template.devices.gpu.kernels import activation

    for approximate in ("none", "tanh"):
        for shape, mult in (((7, 2 * 13), 0.5), ((3, 4, 2 * 100), 1.6448), ((2, 2 * 1000), -0.3)):
            x = _randn(*shape)
            torch.testing.assert_close(
                activation.gelu_and_mul_sparse(x, mult, approximate),
                native_gelu_and_mul_sparse(x, mult, approximate),
                atol=1e-5,
                rtol=1e-5,
            )
        for dtype in (torch.bfloat16, torch.float16):
            x = _randn(5, 2 * 96, dtype=dtype)
            expected = native_gelu_and_mul_sparse(x.float(), 1.0, approximate).to(dtype)
            got = activation.gelu_and_mul_sparse(x, 1.0, approximate)
            torch.testing.assert_close(got, expected, **_tol(dtype))
    x = _randn(4, 2 * 300)
    saved = activation.GELU_MAX_SINGLE_PASS_BLOCK, activation.GELU_MULTI_PASS_BLOCK
    activation.GELU_MAX_SINGLE_PASS_BLOCK, activation.GELU_MULTI_PASS_BLOCK = 64, 64
    try:
        torch.testing.assert_close(
            activation.gelu_and_mul_sparse(x, 0.7),
            native_gelu_and_mul_sparse(x, 0.7),
            atol=1e-5,
            rtol=1e-5,
        )
    finally:
        activation.GELU_MAX_SINGLE_PASS_BLOCK, activation.GELU_MULTI_PASS_BLOCK = saved
    _expect_value_error(lambda: activation.gelu_and_mul_sparse(x, 1.0, "fast"), "approximate")


ROTARY_CASES = (
    # num_tokens, num_heads, num_kv_heads, head_size, rotary_dim
    (5, 4, 2, 64, 64),
    (7, 3, 1, 40, 24),  # rotary_dim < head_size, heads not a power of two
    (3, 16, 16, 128, 128),
)


def _rotary_expected(positions, query, key, head_size, cos_sin_cache, neox):
    """Reference on upcast inputs, the cache first cast to the query dtype (as the kernel)."""
    from vllm_platform_template.reference_kernels import reference

    dtype = query.dtype
    q, k = reference.rotary_embedding(
        positions,
        query.float(),
        key.float() if key is not None else None,
        head_size,
        cos_sin_cache.to(dtype).float(),
        neox,
    )
    return q.to(dtype), (k.to(dtype) if k is not None else None)


def check_rotary_embedding() -> None:
    from vllm_platform_template.devices.gpu.kernels.rotary import rotary_embedding_
    from vllm_platform_template.reference_kernels import reference

    for neox in (True, False):
        for num_tokens, hq, hkv, head_size, rot in ROTARY_CASES:
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                positions = torch.randint(0, 50, (num_tokens,), generator=_gen())
                # The cache in the model dtype (as vLLM keeps it): the interpreter's
                # truncating fp32 -> bf16 cast would otherwise perturb cos/sin.
                cache = _randn(50, rot, dtype=dtype, seed=3)
                qkv = _randn(num_tokens, (hq + 2 * hkv) * head_size, dtype=dtype)
                q, k, _ = qkv.split([hq * head_size, hkv * head_size, hkv * head_size], dim=-1)
                if dtype == torch.float32:
                    eq, ek = reference.rotary_embedding(positions, q, k, head_size, cache, neox)
                else:
                    eq, ek = _rotary_expected(positions, q, k, head_size, cache, neox)
                out_q, out_k = rotary_embedding_(positions, q, k, head_size, cache, neox)
                assert out_q is q and out_k is k
                torch.testing.assert_close(q, eq, **_tol(dtype))
                torch.testing.assert_close(k, ek, **_tol(dtype))
    # key None, int32 positions, 3-D query
    positions = torch.tensor([3, 0, 9], dtype=torch.int32)
    q = _randn(3, 2, 32)
    eq, _ = reference.rotary_embedding(positions, q, None, 32, _randn(10, 16, seed=4), True)
    _, none_key = rotary_embedding_(positions, q, None, 32, _randn(10, 16, seed=4), True)
    assert none_key is None
    torch.testing.assert_close(q, eq)
    empty = torch.empty(0, 64)
    rotary_embedding_(torch.empty(0, dtype=torch.int64), empty, empty, 32, _randn(4, 32), True)


def check_rotary_embedding_and_cache() -> None:
    from vllm_platform_template.devices.gpu.kernels.rotary import rotary_embedding_and_cache_

    for neox in (True, False):
        for block_size in (16, 32):
            for num_tokens, hq, hkv, head_size, rot in ROTARY_CASES:
                num_blocks = 3
                kv_cache = torch.full((num_blocks, hkv, block_size, 2 * head_size), float("nan"))
                key_cache, value_cache = split_kv_cache(kv_cache)
                # Every token is rotated; slot -1 and the last row (no slot: padding)
                # must not be written.
                slots = torch.randperm(num_blocks * block_size, generator=_gen())[: num_tokens - 1]
                slots[0] = -1
                positions = torch.randint(0, 50, (num_tokens,), generator=_gen(1))
                cache = _randn(50, rot, seed=3)
                qkv = _randn(num_tokens, (hq + 2 * hkv) * head_size)
                q, k, v = qkv.split([hq * head_size, hkv * head_size, hkv * head_size], dim=-1)
                eq, ek = _rotary_expected(positions, q, k, head_size, cache, neox)
                rotary_embedding_and_cache_(
                    positions, q, k, v, head_size, cache, neox, key_cache, value_cache, slots
                )
                torch.testing.assert_close(q, eq)
                torch.testing.assert_close(k, ek)
                expected_kv = torch.full_like(kv_cache, float("nan"))
                exp_k, exp_v = split_kv_cache(expected_kv)
                ref_reshape_and_cache(
                    ek.view(num_tokens, hkv, head_size),
                    v.reshape(num_tokens, hkv, head_size),
                    exp_k,
                    exp_v,
                    slots,
                )
                torch.testing.assert_close(kv_cache, expected_kv, equal_nan=True)


def check_rotary_rejects_bad_inputs() -> None:
    from vllm_platform_template.devices.gpu.kernels.rotary import rotary_embedding_

    pos = torch.zeros(2, dtype=torch.int64)
    q = _randn(2, 64)
    _expect_value_error(
        lambda: rotary_embedding_(pos, q, None, 32, _randn(8, 40), True), "rotary_dim"
    )
    _expect_value_error(lambda: rotary_embedding_(pos, q, None, 30, _randn(8, 16), True), "query")
    _expect_value_error(
        lambda: rotary_embedding_(pos.float(), q, None, 32, _randn(8, 16), True), "positions"
    )
    _expect_value_error(
        lambda: rotary_embedding_(pos, q, q.half(), 32, _randn(8, 16), True), "key dtype"
    )


def check_reshape_and_cache() -> None:
    from vllm_platform_template.devices.gpu.kernels.kv_write import reshape_and_cache_

    for dtype in (torch.float32, torch.bfloat16):
        for block_size in (16, 32):
            num_tokens, hkv, head_size, num_blocks = 21, 3, 40, 4
            kv_cache = torch.full(
                (num_blocks, hkv, block_size, 2 * head_size), float("nan"), dtype=dtype
            )
            key_cache, value_cache = split_kv_cache(kv_cache)
            expected = kv_cache.clone()
            exp_k, exp_v = split_kv_cache(expected)
            # Fewer slots than key rows: the last 3 rows are padding, not written.
            slots = torch.randperm(num_blocks * block_size, generator=_gen())[: num_tokens - 3]
            slots[[2, 5]] = -1
            kv = _randn(num_tokens, 2 * hkv, head_size + 8, dtype=dtype)  # strided heads/tokens
            key, value = kv[:, :hkv, :head_size], kv[:, hkv:, :head_size]
            reshape_and_cache_(key, value, key_cache, value_cache, slots)
            ref_reshape_and_cache(key, value, exp_k, exp_v, slots)
            torch.testing.assert_close(kv_cache, expected, equal_nan=True, rtol=0, atol=0)
    _expect_value_error(
        lambda: reshape_and_cache_(key, value, key_cache.float(), value_cache, slots), "dtype"
    )
    too_many = torch.cat([slots, slots[:4]])
    _expect_value_error(
        lambda: reshape_and_cache_(key, value, key_cache, value_cache, too_many), "slot_mapping"
    )
    _expect_value_error(
        lambda: reshape_and_cache_(key, value, key_cache, value_cache, slots.int()), "int64"
    )


ATTENTION_CASES = (
    # q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size
    ((1, 5, 1, 17), (9, 40, 33, 17), 8, 2, 64, 16),  # mixed prefill/decode, GQA 4
    ((3, 1), (70, 5), 4, 4, 40, 32),  # MHA, head size not a power of two
    ((30, 2, 0), (40, 90, 12), 6, 2, 32, 16),  # GQA 3, a request with no query
    ((12,), (12,), 2, 1, 16, 32),  # prefill without context
)


def check_paged_attention_mixed_batch_fp32() -> None:
    for q_lens, seq_lens, hq, hkv, head_size, block_size in ATTENTION_CASES:
        batch = _paged_batch(q_lens, seq_lens, hq, hkv, head_size, block_size, torch.float32)
        out = _run_attention(batch, max(q_lens))
        torch.testing.assert_close(out, _ref_attention(batch))


def check_paged_attention_decode_splits() -> None:
    seq_lens = (100, 3, 64, 33)
    for hq, hkv, head_size, block_size in ((8, 2, 64, 16), (6, 2, 32, 32), (8, 1, 16, 16)):
        batch = _paged_batch(
            (1,) * len(seq_lens), seq_lens, hq, hkv, head_size, block_size, torch.float32
        )
        expected = _ref_attention(batch)
        for splits in (None, 1, 3, 8):
            out = _run_attention(batch, 1, decode_splits=splits)
            torch.testing.assert_close(out, expected)


def check_paged_attention_fp16() -> None:
    for q_lens, seq_lens, hq, hkv, head_size, block_size in ATTENTION_CASES[:2]:
        batch = _paged_batch(q_lens, seq_lens, hq, hkv, head_size, block_size, torch.float16)
        out = _run_attention(batch, max(q_lens))
        torch.testing.assert_close(out, _ref_attention(batch), atol=5e-3, rtol=5e-3)
    batch = _paged_batch((1, 1), (50, 7), 8, 2, 64, 16, torch.float16)
    out = _run_attention(batch, 1, decode_splits=2)
    torch.testing.assert_close(out, _ref_attention(batch), atol=5e-3, rtol=5e-3)


def check_paged_attention_bf16() -> None:
    pytest.skip(
        "Triton 3.9's interpreter computes tl.dot on bfloat16 operands from their raw bits "
        "(numpy has no bfloat16); bf16 attention is covered by "
        "tests/devices/gpu/speed_tier/test_triton_kernels.py"
    )


def _stale_new_slots(batch, q_lens, seq_lens, block_size) -> None:
    """NaN where the cache holds the batch's new tokens: a kernel that reads them from the
    cache instead of ``key``/``value`` produces NaN."""
    for r, (q_len, seq_len) in enumerate(zip(q_lens, seq_lens, strict=True)):
        pos = torch.arange(seq_len - q_len, seq_len)
        blocks = batch["block_table"][r, pos // block_size].to(torch.int64)
        batch["key_cache"][blocks, :, pos % block_size] = float("nan")
        batch["value_cache"][blocks, :, pos % block_size] = float("nan")


def check_prefill_attention_reads_the_new_keys_where_the_step_holds_them() -> None:
    """The prefill kernel: the cached context through the block table, the new tokens'
    keys from the step's ``key``/``value`` rows (their cache slots stale), causal, for
    tiles smaller and larger than the queries, in fp32 and fp16."""
    from vllm_platform_template.devices.gpu.kernels.attention_prefill import (
        PrefillConfig,
        prefill_attention_unchecked,
    )

    configs = (
        PrefillConfig(16, 16, 4, 1),
        PrefillConfig(32, 16, 4, 2),
        PrefillConfig(64, 32, 4, 2),
    )
    for dtype, tol in ((torch.float32, {}), (torch.float16, {"atol": 5e-3, "rtol": 5e-3})):
        for q_lens, seq_lens, hq, hkv, head_size, block_size in ATTENTION_CASES:
            batch = _paged_batch(q_lens, seq_lens, hq, hkv, head_size, block_size, dtype)
            expected = _ref_attention(batch)
            _stale_new_slots(batch, q_lens, seq_lens, block_size)
            for config in configs:
                out = torch.full_like(batch["query"], float("nan"))
                prefill_attention_unchecked(
                    batch["query"], batch["key"], batch["value"], batch["key_cache"],
                    batch["value_cache"], out, batch["block_table"], batch["seq_lens"],
                    batch["query_start_loc"], head_size**-0.5, config,
                )  # fmt: skip
                torch.testing.assert_close(out, expected, **tol)


def check_planned_prefill_reads_the_steps_keys_when_given() -> None:
    """A prefill plan launches the prefill kernel when the step's keys and values are
    given (their cache slots then stale: the general kernel would give NaN), the general
    kernel without them; both equal the reference."""
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa

    for q_lens, seq_lens, hq, hkv, head_size, block_size in ATTENTION_CASES:
        batch = _paged_batch(q_lens, seq_lens, hq, hkv, head_size, block_size, torch.float32)
        expected = _ref_attention(batch)
        planner = _planner(hq, hkv, head_size, block_size, len(seq_lens))
        plan = planner.plan(
            num_reqs=len(seq_lens), num_tokens=sum(q_lens), max_query_len=max(q_lens)
        )
        assert not plan.decode and plan.prefill is not None
        args = (batch["key_cache"], batch["value_cache"])
        meta = (batch["block_table"], batch["seq_lens"], batch["query_start_loc"])
        general = torch.full_like(batch["query"], float("nan"))
        pa.attend_unchecked(batch["query"], *args, general, *meta, head_size**-0.5, plan)
        torch.testing.assert_close(general, expected)
        _stale_new_slots(batch, q_lens, seq_lens, block_size)
        out = torch.full_like(batch["query"], float("nan"))
        pa.attend_unchecked(
            batch["query"], *args, out, *meta, head_size**-0.5, plan, batch["key"], batch["value"]
        )
        torch.testing.assert_close(out, expected)


def check_paged_attention_leaves_padding_and_rejects_bad_inputs() -> None:
    from vllm_platform_template.devices.gpu.kernels.paged_attention import paged_attention

    batch = _paged_batch((2, 1), (10, 4), 4, 2, 16, 16, torch.float32)
    query = batch["query"]
    padded = torch.cat([query, _randn(2, 4, 16)])  # two padding tokens past query_start_loc[-1]
    output = torch.full_like(padded, 7.0)
    args = (batch["key_cache"], batch["value_cache"])
    meta = (batch["block_table"], batch["seq_lens"], batch["query_start_loc"], 0.25)
    paged_attention(padded, *args, output, *meta, 2)
    assert torch.all(output[3:] == 7.0)
    assert not torch.isnan(output[:3]).any()
    out = torch.empty_like(query)
    _expect_value_error(
        lambda: paged_attention(query[:, :3], *args, out[:, :3], *meta, 2), "multiple"
    )
    _expect_value_error(lambda: paged_attention(query.half(), *args, out.half(), *meta, 2), "dtype")
    # One contract for every path: output shaped like query, int32 index tensors.
    _expect_value_error(lambda: paged_attention(query, *args, out[:2], *meta, 2), "output shape")
    for i, name in enumerate(("block_table", "seq_lens", "query_start_loc")):
        bad_meta = list(meta)
        bad_meta[i] = meta[i].long()
        _expect_value_error(
            lambda bad=tuple(bad_meta): paged_attention(query, *args, out, *bad, 2), name
        )
    empty = query[:0]
    assert paged_attention(empty, *args, out[:0], *meta, 0).shape[0] == 0


def _planner(num_heads, num_kv_heads, head_size, block_size, max_num_reqs, **kwargs):
    from vllm_platform_template.devices.gpu.kernels.paged_attention import TritonAttentionPlanner
    from vllm_platform_template.reference_kernels.paged_attention.contract import AttentionLayout

    layout = AttentionLayout(num_heads, num_kv_heads, head_size, torch.float32, block_size)
    return TritonAttentionPlanner(layout, max_num_reqs, torch.device("cpu"), **kwargs)


def check_plan_depends_on_the_batch_shape_only() -> None:
    """The same plan and scratch for a shape whatever the lengths; the split count from
    (requests, KV heads, multiprocessors) alone."""
    import inspect

    from vllm_platform_template.devices.gpu.kernels import attention_decode

    assert list(inspect.signature(attention_decode.decode_num_splits).parameters) == [
        "num_reqs",
        "num_kv_heads",
        "num_multiprocessors",
    ]
    planner = _planner(8, 1, 64, 16, max_num_reqs=8)
    qsl = torch.arange(5, dtype=torch.int32)
    short = planner.plan(
        num_reqs=4,
        num_tokens=4,
        max_query_len=1,
        seq_lens=torch.full((4,), 17),
        query_start_loc=qsl,
    )
    long = planner.plan(
        num_reqs=4,
        num_tokens=4,
        max_query_len=1,
        seq_lens=torch.full((4,), 4096),
        query_start_loc=qsl,
    )
    assert short is long
    assert short.decode and short.num_splits == attention_decode.decode_num_splits(4, 1, 4) > 1
    assert short.part_acc.data_ptr() == planner.scratch.data_ptr()
    other = planner.plan(num_reqs=1, num_tokens=1, max_query_len=1)
    assert other.num_splits == attention_decode.decode_num_splits(1, 1, 4) != short.num_splits
    assert other.part_acc.data_ptr() == planner.scratch.data_ptr()
    prefill = planner.plan(num_reqs=2, num_tokens=40, max_query_len=39)
    assert not prefill.decode and prefill.combine is None
    assert planner.plan(num_reqs=2, num_tokens=40, max_query_len=39) is prefill
    _expect_value_error(
        lambda: planner.plan(num_reqs=9, num_tokens=9, max_query_len=1), "at most 8 requests"
    )


def check_builder_build_allocates_nothing_and_never_reads_to_host() -> None:
    """``build()`` with the Triton planner: no tensor made, no .item()/.cpu()/.tolist()."""
    from types import SimpleNamespace
    from unittest import mock

    from vllm.v1.attention.backend import AttentionCGSupport, CommonAttentionMetadata
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    from vllm_platform_template.attention.metadata import TemplateAttentionMetadataBuilder
    from vllm_platform_template.devices.gpu.attention_kernels import TritonAttentionKernels

    # One KV head: four requests still split (the interpreter counts 4 multiprocessors).
    spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=torch.float32)
    config = SimpleNamespace(
        model_config=SimpleNamespace(get_num_attention_heads=lambda _: 8),
        parallel_config=None,
        additional_config={},
        compilation_config=SimpleNamespace(static_forward_context={}),
        scheduler_config=SimpleNamespace(max_num_seqs=8),
    )
    kernels = TritonAttentionKernels()
    with mock.patch("vllm_platform_template.attention.metadata._kernels_for", return_value=kernels):
        builder = TemplateAttentionMetadataBuilder(spec, ["l0"], config, torch.device("cpu"))
        support = TemplateAttentionMetadataBuilder.get_cudagraph_support(config, spec)
    assert support == AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE
    qsl = torch.tensor([0, 1, 2, 3, 3], dtype=torch.int32)
    cm = CommonAttentionMetadata(
        query_start_loc=qsl,
        query_start_loc_cpu=qsl,
        seq_lens=torch.tensor([17, 4096, 5, 0], dtype=torch.int32),
        num_reqs=4,
        num_actual_tokens=4,
        max_query_len=1,
        max_seq_len=4096,
        block_table_tensor=torch.zeros(4, 256, dtype=torch.int32),
        slot_mapping=torch.tensor([1, 2, 3, -1]),
    )

    def refuse(*args, **kwargs):
        raise AssertionError("build() made a tensor or read one to the host")

    with (
        mock.patch.object(torch, "empty", refuse),
        mock.patch.object(torch, "zeros", refuse),
        mock.patch.object(torch, "full", refuse),
        mock.patch.object(torch, "tensor", refuse),
        mock.patch.object(torch.Tensor, "item", refuse),
        mock.patch.object(torch.Tensor, "cpu", refuse),
        mock.patch.object(torch.Tensor, "tolist", refuse),
    ):
        first = builder.build(0, cm)
        captured = builder.build_for_cudagraph_capture(cm)
    assert first.plan is captured.plan and first.seq_lens is cm.seq_lens
    assert first.plan.part_acc.data_ptr() == builder.planner.scratch.data_ptr()
    cm.max_query_len = 3
    with pytest.raises(RuntimeError, match="single-token decode"):
        builder.build_for_cudagraph_capture(cm)


def check_padded_decode_batch_equals_reference_and_leaves_padding() -> None:
    """A decode batch padded as vLLM pads a FULL graph's batch (a request with no
    tokens, a token past the last request): real rows equal the reference, the
    padded row and the cache slot it would write stay untouched."""
    from vllm_platform_template.devices.gpu.kernels import kv_write
    from vllm_platform_template.devices.gpu.kernels import paged_attention as pa

    batch = _paged_batch((1, 1, 1), (300, 45, 700), 8, 1, 64, 16, torch.float32)
    expected = _ref_attention(batch)
    query = torch.cat([batch["query"], _randn(1, 8, 64, seed=3)])
    qsl = torch.tensor([0, 1, 2, 3, 3], dtype=torch.int32)
    seq_lens = torch.cat([batch["seq_lens"], torch.zeros(1, dtype=torch.int32)])
    block_table = torch.cat([batch["block_table"], torch.zeros_like(batch["block_table"][:1])])
    planner = _planner(8, 1, 64, 16, max_num_reqs=4)
    plan = planner.plan(num_reqs=4, num_tokens=4, max_query_len=1)
    assert plan.num_splits > 1  # the merge runs too
    cache_before = batch["kv_cache"].clone()
    key = _randn(4, 1, 64, seed=4)
    kv_write.write_kv_unchecked(
        key, key, batch["key_cache"], batch["value_cache"], torch.full((4,), -1)
    )
    torch.testing.assert_close(batch["kv_cache"], cache_before, equal_nan=True, rtol=0, atol=0)
    output = torch.full_like(query, 7.0)
    pa.attend_unchecked(
        query, batch["key_cache"], batch["value_cache"], output, block_table, seq_lens, qsl,
        64**-0.5, plan,
    )  # fmt: skip
    torch.testing.assert_close(output[:3], expected)
    assert torch.all(output[3] == 7.0)


def check_int8_linear_matches_the_reference() -> None:
    """Per-token quantization bit for bit; the GEMM within the epilogue's fp32 rounding;
    decode and prefill tiles, a bias, rows that are all zero, bf16 and fp32."""
    from vllm_platform_template.devices.gpu.kernels import int8_linear
    from vllm_platform_template.reference_kernels import int8_linear as reference

    for m, k, n, dtype in ((1, 256, 96, torch.float32), (7, 300, 130, torch.bfloat16),
                           (70, 512, 200, torch.float32)):  # fmt: skip
        x = _randn(m, k, dtype=dtype)
        x[0] = 0.0
        q, scale = int8_linear.per_token_quant_int8(x)
        want_q, want_scale = reference.per_token_quant_int8(x)
        assert torch.equal(q, want_q) and torch.equal(scale, want_scale)
        gen = torch.Generator().manual_seed(n)
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
        w_scale = torch.rand(n, generator=gen) / 50
        for bias in (None, _randn(n, dtype=dtype, seed=3)):
            got = int8_linear.w8a8_int8_linear(x, weight, w_scale, bias)
            want = reference.w8a8_int8_linear(x, weight, w_scale, bias)
            assert got.dtype == dtype
            torch.testing.assert_close(got, want, **_tol(dtype))


def check_fused_moe_matches_the_reference() -> None:
    """Decode (few pairs per expert) and prefill tiles, an expert no token picks,
    renormalised or not, fp32 and fp16 (the interpreter's tl.dot cannot take bf16: see
    check_paged_attention_bf16); the grouping covers every pair once."""
    from vllm_platform_template.devices.gpu.kernels import fused_moe
    from vllm_platform_template.reference_kernels import fused_moe as reference

    for tokens, experts, top_k, dtype in ((1, 4, 2, torch.float32), (5, 8, 2, torch.float16),
                                          (90, 4, 2, torch.float32)):  # fmt: skip
        hidden, inter = 64, 48
        x = _randn(tokens, hidden, dtype=dtype)
        logits = _randn(tokens, experts, seed=1)
        logits[:, -1] = -30.0  # the last expert is never picked
        w13 = (_randn(experts, 2 * inter, hidden, dtype=dtype, seed=2) / 8).contiguous()
        w2 = (_randn(experts, hidden, inter, dtype=dtype, seed=3) / 8).contiguous()
        for renormalize in (True, False):
            got = fused_moe.fused_moe(x, logits, w13, w2, top_k, renormalize)
            want = reference.fused_moe(x, logits, w13, w2, top_k, renormalize)
            torch.testing.assert_close(got, want, **_tol(dtype))
        _, ids = reference.route_topk_softmax(logits, top_k, True)
        block_m = fused_moe.block_m(tokens * top_k, experts)
        slots, block_expert = fused_moe.group_by_expert(ids, experts, block_m)
        real = slots[slots < tokens * top_k]
        assert sorted(real.tolist()) == list(range(tokens * top_k))
        for block, expert in enumerate(block_expert.tolist()):
            pairs = slots[block * block_m : (block + 1) * block_m]
            pairs = pairs[pairs < tokens * top_k]
            assert expert >= 0 or pairs.numel() == 0
            assert (ids.reshape(-1)[pairs] == expert).all()


def check_fused_moe_w8a8_int8_matches_the_reference() -> None:
    """INT8 experts: decode and prefill tiles, an expert no token picks, fp32 and bf16
    activations (the products are int8 x int8 either way): fp32 within rounding (equal
    at one token), bf16 within the rounding of its bf16 outputs."""
    from vllm_platform_template.devices.gpu.kernels import fused_moe
    from vllm_platform_template.reference_kernels import fused_moe as reference

    for tokens, experts, dtype in ((1, 4, torch.float32), (6, 8, torch.bfloat16),
                                   (90, 4, torch.float32)):  # fmt: skip
        hidden, inter = 64, 48
        gen = _gen(tokens)
        x = _randn(tokens, hidden, dtype=dtype)
        logits = _randn(tokens, experts, seed=1)
        logits[:, -1] = -30.0  # the last expert is never picked
        w13 = torch.randint(
            -127, 128, (experts, 2 * inter, hidden), dtype=torch.int8, generator=gen
        )
        w2 = torch.randint(-127, 128, (experts, hidden, inter), dtype=torch.int8, generator=gen)
        w13_scale = torch.rand(experts, 2 * inter, generator=gen) / 500
        w2_scale = torch.rand(experts, hidden, generator=gen) / 500
        args = (x, logits, w13, w13_scale, w2, w2_scale, 2, True)
        got = fused_moe.fused_moe_w8a8_int8(*args)
        want = reference.fused_moe_w8a8_int8(*args)
        assert got.dtype == dtype
        if dtype == torch.float32:
            torch.testing.assert_close(got, want, **_tol(dtype))
        else:  # bf16 outputs, summed in another order (6 bf16 steps seen)
            atol = 4e-2 * float(want.abs().max())
            torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=atol)
    _expect_value_error(
        lambda: fused_moe.fused_moe_w8a8_int8(
            x, logits, w13, w13_scale[:, :1], w2, w2_scale, 2, True
        ),
        "w13_scale must be",
    )


CHECKS: dict[str, Callable[[], None]] = {
    name.removeprefix("check_"): fn
    for name, fn in dict(globals()).items()
    if name.startswith("check_") and callable(fn)
}


# ---------------------------------------------------------------------------
# Child side: run checks under TRITON_INTERPRET=1 and print one JSON report
# ---------------------------------------------------------------------------


def _child_main(names: list[str]) -> int:
    report: dict[str, dict[str, str]] = {}
    for name in names:
        try:
            CHECKS[name]()
            report[name] = {"status": "passed", "detail": ""}
        except pytest.skip.Exception as exc:
            report[name] = {"status": "skipped", "detail": str(exc)}
        except BaseException:
            report[name] = {"status": "failed", "detail": traceback.format_exc()}
    print(REPORT_MARK + json.dumps(report), flush=True)
    return 0


# ---------------------------------------------------------------------------
# Parent side: one pytest test per check
# ---------------------------------------------------------------------------


def _triton_importable() -> str | None:
    try:
        import triton  # noqa: F401
    except Exception as exc:
        return f"triton is not importable: {exc}"
    return None


@pytest.fixture(scope="module")
def interpreter_report(request: pytest.FixtureRequest) -> dict[str, dict[str, str]]:
    problem = _triton_importable()
    if problem:
        pytest.skip(problem)
    this_file = Path(__file__).resolve()
    selected = [
        item.callspec.params["name"]
        for item in request.session.items
        if Path(str(item.fspath)).resolve() == this_file and hasattr(item, "callspec")
    ] or list(CHECKS)
    python_path = os.pathsep.join(
        p
        for p in (
            str(REPO_ROOT),
            str(REPO_ROOT / "tests"),
            str(REPO_ROOT / "tests" / "full_plugin"),
            os.environ.get("PYTHONPATH"),
        )
        if p
    )
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONUNBUFFERED="1", PYTHONPATH=python_path)
    try:
        proc = subprocess.run(
            [sys.executable, str(this_file), *selected],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"interpreter child timed out after {CHILD_TIMEOUT_S}s: {exc.stderr}")
    for line in proc.stdout.splitlines():
        if line.startswith(REPORT_MARK):
            return json.loads(line[len(REPORT_MARK) :])
    pytest.fail(
        f"interpreter child exited {proc.returncode} without a report\n"
        f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    )


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_interpreted(name: str, interpreter_report: dict[str, dict[str, str]]) -> None:
    result = interpreter_report.get(name)
    assert result is not None, f"check {name} did not run in the interpreter child"
    if result["status"] == "skipped":
        pytest.skip(result["detail"])
    if result["status"] == "failed":
        pytest.fail(f"check {name} failed under TRITON_INTERPRET=1:\n{result['detail']}")


def test_triton_available_never_raises() -> None:
    from vllm_platform_template.devices.gpu.kernels import triton_available

    ok, reason = triton_available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:] or list(CHECKS)))

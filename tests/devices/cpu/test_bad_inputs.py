"""Bad and unusual inputs to the template_cpu kernels and providers.

Every call either returns the native op's result (within vllm.ir's tolerance)
or raises ValueError before a kernel touches memory.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from vllm.ir.op import IrOp

import vllm_platform_template.ir_impls  # noqa: F401
from vllm_platform_template.devices.cpu import kernels as cpu
from vllm_platform_template.devices.cpu import vllm_cpu_build

BUILD = vllm_cpu_build.load_cpu_kernels()
if not BUILD.loaded:
    pytest.skip(f"vLLM's CPU kernels: {BUILD.reason}", allow_module_level=True)

DTYPES = st.sampled_from([torch.float32, torch.bfloat16, torch.float16])


def _tensor(tokens: int, hidden: int, dtype: torch.dtype, strided: bool) -> torch.Tensor:
    base = torch.randn(tokens, hidden + (8 if strided else 0), dtype=torch.float32).to(dtype)
    return base[:, :hidden]


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.integers(0, 40),
    hidden=st.integers(1, 700),
    dtype=DTYPES,
    strided=st.booleans(),
    with_weight=st.booleans(),
    op_name=st.sampled_from(["rms_norm", "fused_add_rms_norm"]),
)
def test_dispatch_matches_native(tokens, hidden, dtype, strided, with_weight, op_name) -> None:
    op = IrOp.registry[op_name]
    x = _tensor(tokens, hidden, dtype, strided)
    weight = torch.randn(hidden).to(dtype) if with_weight else None
    if op_name == "rms_norm":
        args = (x, weight, 1e-5, None)
    else:
        args = (x, _tensor(tokens, hidden, dtype, strided), weight, 1e-5, None)
    want = op.impls["native"].impl_fn(*[a.clone() if torch.is_tensor(a) else a for a in args])
    with op.set_priority(["template_cpu", "native"]):
        got = op(*[a.clone() if torch.is_tensor(a) else a for a in args])
    tolerance = op.get_tolerance(dtype)
    for g, w in zip(
        got if isinstance(got, tuple) else (got,),
        want if isinstance(want, tuple) else (want,),
        strict=True,
    ):
        torch.testing.assert_close(g, w, **tolerance)


@settings(max_examples=30, deadline=None)
@given(tokens=st.integers(0, 20), half=st.integers(1, 300), dtype=DTYPES)
def test_silu_and_mul_matches_reference(tokens, half, dtype) -> None:
    x = torch.randn(tokens, 2 * half).to(dtype)
    want = torch.nn.functional.silu(x[..., :half]) * x[..., half:]
    torch.testing.assert_close(cpu.silu_and_mul(x), want)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cpu.rms_norm(torch.ones(2, 16, dtype=torch.int32), None, 1e-5), "float32"),
        (lambda: cpu.rms_norm(torch.ones(2, 16), torch.ones(8), 1e-5), "weight must be [16]"),
        (
            lambda: cpu.rms_norm(torch.ones(2, 16), torch.ones(16, dtype=torch.bfloat16), 1e-5),
            "weight must be",
        ),
        (
            lambda: cpu.fused_add_rms_norm_(torch.ones(2, 16), torch.ones(3, 16), None, 1e-5),
            "residual must match",
        ),
        (lambda: cpu.silu_and_mul(torch.ones(2, 7)), "must be even"),
        (lambda: cpu.rms_norm(torch.tensor(1.0), None, 1e-5), "hidden dimension"),
    ],
)
def test_misuse_is_a_clear_error(call, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_zero_tokens_and_huge_rows() -> None:
    empty = torch.empty(0, 64)
    assert cpu.rms_norm(empty, torch.ones(64), 1e-5).shape == (0, 64)
    x = torch.randn(2, 1 << 17)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(cpu.rms_norm(x, None, 1e-5), want, atol=1e-5, rtol=1e-5)

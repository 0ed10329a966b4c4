"""The conformance tests (pytest). Import them into a test module of your plugin.

See ``vllm_platform_template_tools.conformance`` for what is checked. Providers are
those registered under ``PROVIDER_PREFIX``; each runs on the device recorded in
``vllm_platform_template.ir_impls.PROVIDER_STATUS``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from vllm.ir import enable_torch_wrap
from vllm.ir.op import IrOp

import vllm_platform_template.ir_impls  # noqa: F401  (registers the providers)
from vllm_platform_template.device import device_for
from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.ir_impls import PROVIDER_STATUS
from vllm_platform_template_tools.conformance import PROVIDER_PREFIX
from vllm_platform_template_tools.conformance.cases import (
    Case,
    all_cases,
    clone_args,
    make_args,
    unsupported_variants,
)


def _providers() -> list[str]:
    return sorted(p for p in PROVIDER_STATUS if p.startswith(PROVIDER_PREFIX))


def _params() -> list[Any]:
    params = []
    for case in all_cases():
        for provider in _providers():
            if provider in IrOp.registry[case.op].impls:
                params.append(pytest.param(case, provider, id=f"{provider}-{case.id}"))
    return params


PARAMS = _params()


def test_kit_found_providers() -> None:
    """A conformance run that checks nothing must fail, not pass."""
    providers = _providers()
    assert providers, f"no IR providers registered under the prefix {PROVIDER_PREFIX!r}"
    assert any(PROVIDER_STATUS[p].supported for p in providers), (
        f"none of {providers} is supported on this machine; nothing was checked"
    )


@pytest.fixture(scope="module", autouse=True)
def _load_platform_kernels() -> None:
    """Load the kernel libraries a worker would have (e.g. vLLM's CPU build for this ISA)."""
    for device_type in DEVICE_PACKAGES:
        device = device_for(device_type)
        if device is not None and device.kernels_status()[0]:
            device.load_libraries()


def _setup(case: Case, provider: str) -> tuple[IrOp, tuple[Any, ...]]:
    status = PROVIDER_STATUS[provider]
    if not status.supported:
        pytest.skip(f"{provider} not supported here: {status.reason}")
    op = IrOp.registry[case.op]
    return op, make_args(case, status.device)


def _assert_close(op: IrOp, got: Any, want: Any, dtype: torch.dtype) -> None:
    tolerance: dict[str, Any] = dict(op.get_tolerance(dtype))
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, **tolerance)
    else:
        torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.parametrize(("case", "provider"), PARAMS)
def test_matches_native(case: Case, provider: str) -> None:
    op, args = _setup(case, provider)
    impl = op.impls[provider]
    if not impl.supports_args(*args):
        pytest.skip(f"{provider} does not take these arguments (see test_falls_through)")
    want = op.impls["native"].impl_fn(*clone_args(args))
    got = impl.func_impl_fn(*clone_args(args))
    _assert_close(op, got, want, case.dtype)


@pytest.mark.parametrize(("case", "provider"), PARAMS)
def test_default_overload_preserves_inputs(case: Case, provider: str) -> None:
    op, args = _setup(case, provider)
    originals = clone_args(args)
    want = op.impls["native"].impl_fn(*clone_args(args))
    for wrapped in (True, False):  # through torch.ops.vllm_ir and direct
        with op.set_priority([provider, "native"]), enable_torch_wrap(wrapped):
            got = op(*args)
        _assert_close(op, got, want, case.dtype)
        for before, after in zip(originals, args, strict=True):
            if isinstance(before, torch.Tensor):
                assert torch.equal(before, after), "the default overload changed an input"


@pytest.mark.parametrize(("case", "provider"), PARAMS)
def test_maybe_inplace(case: Case, provider: str) -> None:
    op, args = _setup(case, provider)
    if not op.allow_inplace:
        pytest.skip(f"{case.op} has no maybe_inplace overload")
    want = op.impls["native"].impl_fn(*clone_args(args))
    donated = clone_args(args)
    with op.set_priority([provider, "native"]), enable_torch_wrap(False):
        got = op.maybe_inplace(*donated)  # type: ignore[attr-defined]
    _assert_close(op, got, want, case.dtype)
    impl = op.impls[provider]
    if impl.inplace and impl.supports_args(*args):
        # An in-place provider writes its results into the donated activations.
        for index, output in zip(op.activation_indices, got, strict=True):
            assert output.data_ptr() == donated[index].data_ptr()


@pytest.mark.parametrize(("case", "provider"), PARAMS)
def test_eager_and_compiled_pick_the_same_provider(case: Case, provider: str) -> None:
    op, args = _setup(case, provider)
    with op.set_priority([provider, "native"]):
        eager = op.dispatch(*args).provider
        with FakeTensorMode(allow_non_fake_inputs=False) as mode:
            fake = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
            lowered = op.dispatch(*fake).provider  # what vLLM's lowering pass does
    assert eager == lowered


@pytest.mark.parametrize(("case", "provider"), PARAMS)
def test_falls_through(case: Case, provider: str) -> None:
    op, args = _setup(case, provider)
    impl = op.impls[provider]
    variants = [(name, change(args)) for name, change in unsupported_variants(args, case.op)]
    if not impl.supports_args(*args):
        variants.append(("generated", args))
    declined = [(name, changed) for name, changed in variants if not impl.supports_args(*changed)]
    if not declined:
        # the provider claims every variant: test_matches_native covers them; a pass here
        # would check nothing
        pytest.skip(f"{provider} takes every variant of {case.id}; nothing falls through")
    for name, changed in declined:
        with op.set_priority([provider, "native"]):
            chosen = op.dispatch(*changed).provider
            got = op(*clone_args(changed))
        assert chosen == "native", f"{name}: dispatch picked {chosen}"
        want = op.impls["native"].impl_fn(*clone_args(changed))
        _assert_close(op, got, want, changed[0].dtype)


# --- the kernel table's quantized-linear and experts ops, against the reference ---------
def _kernel_tables() -> list[Any]:
    return [pytest.param(device_type, id=device_type) for device_type in DEVICE_PACKAGES]


def _table_on(device_type: str, op: str) -> tuple[Any, str]:
    device = device_for(device_type)
    assert device is not None
    usable, reason = device.kernels_status()
    if not usable:
        pytest.skip(f"{device_type} kernels not usable here: {reason}")
    table = device.kernels()
    if getattr(table, op) is None:
        pytest.skip(f"the {device_type} kernel table has no {op}")
    return table, device.kernel_test_device_type or device.torch_device_type


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device_type", _kernel_tables())
def test_w8a8_int8_linear_matches_the_reference(device_type: str, dtype: torch.dtype) -> None:
    """Decode and prefill rows, with and without bias: the quantized product within one
    rounding of the output dtype (the int32 sums are exact on every device)."""
    from vllm_platform_template.reference_kernels.int8_linear import w8a8_int8_linear

    table, on = _table_on(device_type, "w8a8_int8_linear")
    gen = torch.Generator().manual_seed(0)
    for m, k, n in ((1, 256, 192), (33, 512, 320)):
        x = torch.randn(m, k, generator=gen).to(dtype)
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
        scale = torch.rand(n, generator=gen) / 100
        for bias in (None, torch.randn(n, generator=gen).to(dtype)):
            args = [t.to(on) if t is not None else None for t in (x, weight, scale, bias)]
            got = table.w8a8_int8_linear(*args)
            want = w8a8_int8_linear(x, weight, scale, bias)
            tolerance: dict[str, Any] = (
                {} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 1.6e-2}
            )
            torch.testing.assert_close(got.cpu(), want, **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device_type", _kernel_tables())
def test_fused_moe_matches_the_reference(device_type: str, dtype: torch.dtype) -> None:
    """One token and many, 8 experts top-2 and 4 experts top-1, renormalised or not."""
    from vllm_platform_template.reference_kernels.fused_moe import fused_moe

    table, on = _table_on(device_type, "fused_moe")
    gen = torch.Generator().manual_seed(0)
    for tokens, experts, top_k in ((1, 8, 2), (40, 4, 1)):
        x = torch.randn(tokens, 128, generator=gen).to(dtype)
        logits = torch.randn(tokens, experts, generator=gen)
        w13 = (torch.randn(experts, 192, 128, generator=gen) / 8).to(dtype)
        w2 = (torch.randn(experts, 128, 96, generator=gen) / 8).to(dtype)
        for renormalize in (True, False):
            got = table.fused_moe(*(t.to(on) for t in (x, logits, w13, w2)), top_k, renormalize)
            want = fused_moe(x, logits, w13, w2, top_k, renormalize)
            tolerance: dict[str, Any] = (
                {} if dtype == torch.float32 else {"atol": 3e-2, "rtol": 2e-2}
            )
            torch.testing.assert_close(got.cpu(), want, **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device_type", _kernel_tables())
def test_fused_moe_w8a8_int8_matches_the_reference(device_type: str, dtype: torch.dtype) -> None:
    """INT8 experts, one token and many: within the rounding of the SiLU-gated rows
    (quantized again before the second projection) and of the output dtype."""
    from vllm_platform_template.reference_kernels.fused_moe import fused_moe_w8a8_int8

    table, on = _table_on(device_type, "fused_moe_w8a8_int8")
    gen = torch.Generator().manual_seed(0)
    for tokens, experts, top_k in ((1, 8, 2), (40, 4, 1)):
        x = torch.randn(tokens, 128, generator=gen).to(dtype)
        logits = torch.randn(tokens, experts, generator=gen)
        w13 = torch.randint(-127, 128, (experts, 192, 128), dtype=torch.int8, generator=gen)
        w2 = torch.randint(-127, 128, (experts, 128, 96), dtype=torch.int8, generator=gen)
        w13_scale = torch.rand(experts, 192, generator=gen) / 500
        w2_scale = torch.rand(experts, 128, generator=gen) / 500
        args = (x, logits, w13, w13_scale, w2, w2_scale)
        got = table.fused_moe_w8a8_int8(*(t.to(on) for t in args), top_k, True)
        want = fused_moe_w8a8_int8(*args, top_k, True)
        scale = float(want.abs().max())
        tolerance: dict[str, Any] = (
            {"atol": 1e-5 * scale, "rtol": 1e-5}
            if dtype == torch.float32
            else {"atol": 4e-2 * scale, "rtol": 2e-2}
        )
        torch.testing.assert_close(got.cpu().float(), want.float(), **tolerance)

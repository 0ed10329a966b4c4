"""Inputs for the conformance kit, from each vLLM IR op's own input generator."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from vllm.ir.op import IrOp

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SHAPES = ((1, 64), (7, 1000), (33, 4096))  # (num_tokens, hidden): decode, odd, wide
VARIANTS = {
    "rms_norm": ("plain", "no_weight", "variance_size", "strided_rows"),
    "fused_add_rms_norm": ("plain", "no_weight", "variance_size", "strided_rows"),
    "gelu_and_mul_sparse": ("plain", "erf", "strided_rows"),
}


@dataclass(frozen=True)
class Case:
    op: str
    variant: str
    num_tokens: int
    hidden: int
    dtype: torch.dtype

    @property
    def id(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{self.op}-{self.variant}-{self.num_tokens}x{self.hidden}-{dtype}"


def _strided(t: torch.Tensor) -> torch.Tensor:
    """Same values with rows spaced wider than the row length (last dim contiguous)."""
    wide = torch.zeros(t.shape[0], t.shape[-1] + 8, dtype=t.dtype, device=t.device)
    wide[:, : t.shape[-1]] = t
    return wide[:, : t.shape[-1]]


def make_args(case: Case, device: str) -> tuple[Any, ...]:
    """Arguments for ``case`` on ``device`` (seeded: the same case, the same tensors)."""
    # crc32, not hash(): str hashes are salted per process (PYTHONHASHSEED).
    torch.manual_seed(zlib.crc32(case.id.encode()))
    op = IrOp.registry[case.op]
    if case.op == "gelu_and_mul_sparse":
        x, std, approximate = op.generate_inputs(
            num_tokens=case.num_tokens, hidden_size=case.hidden, dtype=case.dtype
        )
        x = x.to(device)
        if case.variant == "erf":
            approximate = "none"
        if case.variant == "strided_rows":
            x = _strided(x)
        return (x, std, approximate)
    args = list(
        op.generate_inputs(
            num_tokens=case.num_tokens, hidden_size=case.hidden, dtype=case.dtype, device=device
        )
    )
    weight_index = 1 if case.op == "rms_norm" else 2
    if case.variant == "no_weight":
        args[weight_index] = None
    if case.variant == "strided_rows":
        args[0] = _strided(args[0])
        if case.op == "fused_add_rms_norm":
            args[1] = _strided(args[1])
    variance_size = case.hidden // 2 if case.variant == "variance_size" else None
    return (*args, variance_size)


def all_cases() -> list[Case]:
    return [
        Case(op, variant, tokens, hidden, dtype)
        for op, variants in VARIANTS.items()
        for variant in variants
        for tokens, hidden in SHAPES
        for dtype in DTYPES
    ]


def clone_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Deep enough copy: tensors copied into storage with the same strides.

    ``Tensor.clone`` keeps the layout only of dense tensors: a view with gaps
    (rows sliced out of a wider buffer) comes back contiguous, and the strided
    case would never reach a provider. ``empty_strided`` + ``copy_`` keeps it.
    """

    def copy(t: torch.Tensor) -> torch.Tensor:
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        return out.copy_(t)

    return tuple(copy(a) if isinstance(a, torch.Tensor) else a for a in args)


def unsupported_variants(
    args: tuple[Any, ...], op: str
) -> list[tuple[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]]]:
    """Argument changes no provider is expected to accept silently (checked for fall-through)."""

    def float64(a: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(t.double() if isinstance(t, torch.Tensor) else t for t in a)

    def transposed(a: tuple[Any, ...]) -> tuple[Any, ...]:
        x = a[0]
        return (x.t().contiguous().t(), *a[1:])  # column-major: last dim not contiguous

    return [("float64", float64), ("column_major", transposed)]

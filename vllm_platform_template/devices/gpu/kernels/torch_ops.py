"""The Triton kernels that vLLM IR dispatches to, as torch operators (``<IR_PROVIDER>::*``).

vLLM hook served: IR lowering. ``VllmIRLoweringPass`` replaces each IR op in a
compiled piece with the chosen provider's implementation by tracing it with
fake tensors (``match.replace_by_example``). A Python function that launches a
Triton kernel cannot be traced (Triton reads the tensors' data pointers; fake
tensors have none), so the fusion-only stage failed on every piece and ran it
eagerly. As torch operators with a fake (shape-only) implementation the kernels
trace as one opaque node each, as vLLM's compiled ``torch.ops._C`` kernels do
for its CPU and CUDA platforms; the graph then calls the operator, which
launches the kernel.

The device kernel table (``device.py``) hands these wrappers to the IR
provider, the CustomOps and the fused model alike. Proven by
``tests/devices/gpu/speed_tier/test_gpu_engine.py::test_compiled_stages_without_graphs_match``
(fusion-only on the device, no piece falling back) and, without a device,
``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py``
(``check_ir_kernels_as_torch_operators``:
results, in-place mutation and tracing with fake tensors, under Triton's interpreter).
"""

from __future__ import annotations

import torch

from vllm_platform_template.devices.gpu.kernels import IR_PROVIDER, activation, layernorm

NAMESPACE = IR_PROVIDER

_LIB = torch.library.Library(NAMESPACE, "DEF")
_OPS = getattr(torch.ops, NAMESPACE)
_LIB.define(
    "rms_norm(Tensor x, Tensor? weight, float epsilon, SymInt? variance_size=None) -> Tensor"
)
_LIB.define(
    "fused_add_rms_norm_(Tensor(a!) x, Tensor(b!) residual, Tensor? weight, float epsilon, "
    "SymInt? variance_size=None) -> ()"
)
_LIB.define("gelu_and_mul_sparse(Tensor x, float std_multiplier, str approximate='none') -> Tensor")


def _fused_add_rms_norm_impl(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> None:
    layernorm.fused_add_rms_norm_(x, residual, weight, epsilon, variance_size)


# CompositeExplicitAutograd: one implementation for every backend key. The kernels
# check the device themselves (the device's tensors, or CPU tensors under Triton's
# interpreter) and raise ValueError saying what to change.
_LIB.impl("rms_norm", layernorm.rms_norm, "CompositeExplicitAutograd")
_LIB.impl("fused_add_rms_norm_", _fused_add_rms_norm_impl, "CompositeExplicitAutograd")
_LIB.impl("gelu_and_mul_sparse", activation.gelu_and_mul_sparse, "CompositeExplicitAutograd")


@torch.library.register_fake(f"{NAMESPACE}::rms_norm", lib=_LIB)
def _rms_norm_fake(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> torch.Tensor:
    return x.new_empty(x.shape)  # a new contiguous tensor, as the kernel returns


@torch.library.register_fake(f"{NAMESPACE}::fused_add_rms_norm_", lib=_LIB)
def _fused_add_rms_norm_fake(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> None:
    return None


@torch.library.register_fake(f"{NAMESPACE}::gelu_and_mul_sparse", lib=_LIB)
def _gelu_and_mul_sparse_fake(
    x: torch.Tensor, std_multiplier: float, approximate: str = "none"
) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> torch.Tensor:
    """``layernorm.rms_norm`` through its operator (traceable); a new tensor."""
    return _OPS.rms_norm(x, weight, epsilon, variance_size)


def fused_add_rms_norm_(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``layernorm.fused_add_rms_norm_`` through its operator; returns ``(x, residual)``."""
    _OPS.fused_add_rms_norm_(x, residual, weight, epsilon, variance_size)
    return x, residual


def gelu_and_mul_sparse(
    x: torch.Tensor, std_multiplier: float, approximate: str = "none"
) -> torch.Tensor:
    """``activation.gelu_and_mul_sparse`` through its operator (traceable); a new tensor."""
    return _OPS.gelu_and_mul_sparse(x, std_multiplier, approximate)

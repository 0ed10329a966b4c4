"""Triton kernels of the template's GPU backend (the device of ``identity.py``).

One module per kernel family, each importing only torch and triton (never vLLM):

- ``layernorm``: ``rms_norm`` and the in-place ``fused_add_rms_norm_``.
- ``activation``: ``silu_and_mul`` and ``gelu_and_mul_sparse``.
- ``rotary``: in-place rotary embedding, optionally fused with the KV-cache write.
- ``paged_attention``: causal paged attention (``reshape_and_cache_``: ``kv_write``)
  over the plugin's KV-cache layout (mixed prefill/decode, grouped-query heads), planned per
  batch shape; its kernels by purpose: ``kv_write`` (the cache write),
  ``attention_prefill`` (the general kernel), ``attention_decode`` (split-KV decode
  and its merge) and ``attention_tile`` (the online-softmax step both repeat).
- ``torch_ops``: the IR ops' kernels as torch operators (``template_triton::*``, with
  fake implementations), so vLLM's IR lowering can trace them into compiled pieces.

The public functions check their inputs on the host and raise ``ValueError``
saying what to change; kernels only ever touch memory inside the tensors they
are given. The same kernels run on the CPU through Triton's interpreter when
``TRITON_INTERPRET=1`` is set before these modules are imported (Triton reads it
when ``@triton.jit`` wraps a kernel); that is how
``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` checks them.

This ``__init__`` imports neither torch nor triton: :func:`triton_available` does,
lazily, and the helpers below are for the kernel modules.

vLLM hooks served: ``Platform.import_kernels`` (``device.load_libraries`` imports
them) and, through ``device.py``'s kernel table, the IR provider, the CustomOps,
the fused model and the attention kernels (docs/porting-guide.md, "Kernels: IR
providers and custom ops").
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` (Triton's interpreter
on the CPU) and, on the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_platform_template.devices.gpu.identity import IDENTITY

if TYPE_CHECKING:
    import torch

__all__ = ["IR_PROVIDER", "triton_available"]

IR_PROVIDER = "template_triton"
"""The name vLLM IR knows these kernels by (``ir_op_priority``), also the ``torch.ops``
namespace of their operators (``torch_ops.py``)."""


def triton_available() -> tuple[bool, str]:
    """Whether the Triton kernels can run here: ``(ok, reason)``; never raises.

    ``reason`` says what is missing (Triton not the device's kernel compiler in
    ``identity.py``, triton not importable, no device) or, when ``ok``, which
    Triton and device were found.
    """
    device = IDENTITY.device_type
    if IDENTITY.kernel_compiler != "triton":
        return False, (
            f"these are Triton kernels, and identity.py names {IDENTITY.kernel_compiler!r} as "
            f"the kernel compiler of {device} (docs/porting-guide.md, "
            "'Kernels: IR providers and custom ops')"
        )
    try:
        import triton
    except Exception as exc:  # ImportError, or a broken install raising anything else
        return False, f"triton is not importable ({type(exc).__name__}: {exc})"
    try:
        module = IDENTITY.torch_module_or_none()
        if module is None or not module.is_available():
            return False, f"no {device} device (torch.{IDENTITY.torch_module} sees none)"
        name = module.get_device_name(module.current_device())
    except Exception as exc:
        return False, f"no usable {device} device ({type(exc).__name__}: {exc})"
    return True, f"triton {triton.__version__} on {name}"


# --------------------------------------------------------------------------
# Shared host-side checks of the kernel modules (not part of the public API).
# --------------------------------------------------------------------------


def is_interpreted(kernel: Any) -> bool:
    """True when ``kernel`` was wrapped by Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    return type(kernel).__name__ == "InterpretedFunction"


def check_launch_device(kernel: Any, op: str, *tensors: torch.Tensor | None) -> None:
    """All tensors on one device the kernel can run on, else ``ValueError``.

    Compiled kernels need tensors on the identity's device; the interpreter, CPU tensors.
    """
    present = [t for t in tensors if t is not None]
    devices = {t.device for t in present}
    if len(devices) > 1:
        found = ", ".join(sorted(str(d) for d in devices))
        raise ValueError(f"{op}: all tensors must be on one device, found {found}")
    device = next(iter(devices))
    if is_interpreted(kernel):
        if device.type != "cpu":
            raise ValueError(
                f"{op}: TRITON_INTERPRET=1 runs kernels on the CPU; move the tensors to the "
                f"CPU (found {device}) or unset TRITON_INTERPRET before importing the kernels"
            )
    elif device.type != IDENTITY.device_type:
        raise ValueError(
            f"{op}: these Triton kernels need {IDENTITY.device_type} tensors, found "
            f"{device.type}; move them with .to({IDENTITY.device_type!r}) (or set "
            "TRITON_INTERPRET=1 before importing the kernels to run the interpreter on the CPU)"
        )


def check_dtype(op: str, name: str, t: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    """``t.dtype`` is one of ``dtypes``, else ``ValueError``."""
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ValueError(f"{op}: {name} has dtype {t.dtype}; supported: {allowed}")


def check_last_dim_contiguous(op: str, name: str, t: torch.Tensor) -> None:
    """``t.stride(-1) == 1`` (rows may be strided), else ``ValueError``."""
    if t.dim() == 0 or (t.shape[-1] > 1 and t.stride(-1) != 1):
        raise ValueError(
            f"{op}: {name} needs a contiguous last dimension (stride 1), found strides "
            f"{tuple(t.stride())}; pass {name}.contiguous()"
        )


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= ``n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()

"""The device's kernels: first light's are the reference kernels (plain torch).

The kernel table (``device.py``) takes its entries from here, with vLLM's op
semantics: ``rms_norm``, ``fused_add_rms_norm`` (returns ``(out, x + residual)``),
``gelu_and_mul_sparse``, ``silu_and_mul``, and the mixture-of-experts block
``fused_moe`` (and ``fused_moe_w8a8_int8``, its W8A8 INT8 experts) and the W8A8 linear
``w8a8_int8_linear``. First light re-exports the
reference (``vllm_platform_template/reference_kernels/``), which vLLM's native code
equals, and takes every call (:func:`supports`). Speed, one op at a time
(docs/porting-guide.md, "10. Kernels: IR providers and custom ops"): write the
kernel in your device's language; register it as a torch operator with a fake
implementation, so that vLLM's IR lowering can trace it into compiled pieces;
replace the entry here and give it a ``supports(...)`` check (dtype, device,
layout; never the batch size); decide the IR priority with measurements on the
device. The rotary embedding and the attention kernels come later
(``KernelTable.rotary_embedding_``, ``attention_kernels.py``).

vLLM hooks served: ``Platform.import_kernels`` (``device.load_libraries``) and,
through ``device.py``'s kernel table, the IR provider and the CustomOps. No vLLM
import. Proven by ``tests/devices/gpu/test_gpu_first_light.py`` (the table serves an
eager engine on the device; its operators are dispatched there, counted).
"""

from __future__ import annotations

from typing import Any

from vllm_platform_template.reference_kernels.fused_moe import fused_moe, fused_moe_w8a8_int8
from vllm_platform_template.reference_kernels.int8_linear import w8a8_int8_linear
from vllm_platform_template.reference_kernels.reference import (
    native_fused_add_rms_norm as fused_add_rms_norm,
)
from vllm_platform_template.reference_kernels.reference import (
    native_gelu_and_mul_sparse as gelu_and_mul_sparse,
)
from vllm_platform_template.reference_kernels.reference import native_rms_norm as rms_norm
from vllm_platform_template.reference_kernels.reference import silu_and_mul

__all__ = [
    "fused_add_rms_norm",
    "fused_moe",
    "fused_moe_w8a8_int8",
    "gelu_and_mul_sparse",
    "rms_norm",
    "silu_and_mul",
    "supports",
    "w8a8_int8_linear",
]


def supports(*args: Any, **kwargs: Any) -> bool:
    """The reference kernels are plain torch: they take every call vLLM makes."""
    return True

"""The template's own torch custom ops (``torch.ops.template.*``).

The fusion passes replace matched patterns with these ops; each dispatches to
the device kernel by the tensor's device. They are proper torch custom ops
(schema, fake implementation), so Dynamo, AOTAutograd, Inductor and the
compile cache treat them as single opaque nodes. Importing this module
registers them; it does not import vLLM.
"""

from __future__ import annotations

import torch

from vllm_platform_template.kernels import cpu as cpu_kernels
from vllm_platform_template.kernels import reference


@torch.library.custom_op("template::silu_and_mul", mutates_args=())
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """Fused SiLU-and-multiply of the gate/up halves of ``x`` (last dimension)."""
    return reference.silu_and_mul(x)


@silu_and_mul.register_fake
def _silu_and_mul_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@silu_and_mul.register_kernel("cpu")
def _silu_and_mul_cpu(x: torch.Tensor) -> torch.Tensor:
    return cpu_kernels.silu_and_mul(x)


@silu_and_mul.register_kernel("cuda")
def _silu_and_mul_cuda(x: torch.Tensor) -> torch.Tensor:
    from vllm_platform_template.kernels.triton.activation import silu_and_mul as triton_silu

    return triton_silu(x)

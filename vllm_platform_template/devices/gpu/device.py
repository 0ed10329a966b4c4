"""The device object: ``DEVICE``, what the rest of the plugin asks about this device.

vLLM hooks served (through the layers that read ``DEVICE``): the IR / CustomOp
kernel table (``ir_impls``, ``custom_ops``, the fused model), the attention
kernels of ``TEMPLATE_ATTN``, the graph backend of the graph wrapper, the IR
op priorities and graph defaults of the config policy. Read by
``vllm_platform_template.device.device_for``; imports no vLLM and no platform
code (only this folder's kernels, loaded lazily). Proven by the conformance kit
(``tests/full_plugin/conformance/test_conformance.py``, on the device) and
``tests/shared/test_policy.py``.
"""

from __future__ import annotations

from typing import Any

from vllm_platform_template.device import AttentionKernels, KernelTable, TemplateDevice
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY
from vllm_platform_template.devices.gpu.kernels import IR_PROVIDER, supports, triton_available


def kernel_table() -> KernelTable:
    from vllm_platform_template.devices.gpu.kernels import (
        activation,
        fused_moe,
        int8_linear,
        rotary,
        torch_ops,
    )

    # The IR ops' kernels go through their torch operators (kernels/torch_ops.py), so
    # that IR lowering can trace them into compiled pieces.
    return KernelTable(
        rms_norm=torch_ops.rms_norm,
        rms_norm_supports=supports.rms_norm_supports,
        fused_add_rms_norm=torch_ops.fused_add_rms_norm_,
        fused_add_rms_norm_supports=supports.fused_add_rms_norm_supports,
        gelu_and_mul_sparse=torch_ops.gelu_and_mul_sparse,
        gelu_and_mul_sparse_supports=supports.gelu_and_mul_sparse_supports,
        silu_and_mul=activation.silu_and_mul,
        rotary_embedding_=rotary.rotary_embedding_,
        w8a8_int8_linear=int8_linear.w8a8_int8_linear,
        fused_moe=fused_moe.fused_moe,
        fused_moe_w8a8_int8=fused_moe.fused_moe_w8a8_int8,
    )


def load_libraries() -> None:
    """The Triton kernel modules (their kernels compile on first launch)."""
    kernel_table()
    attention_kernels()


def attention_kernels() -> AttentionKernels:
    from vllm_platform_template.devices.gpu.attention_kernels import TritonAttentionKernels

    return TritonAttentionKernels()


def graph_backend(pool: Any) -> Any:
    from vllm_platform_template.devices.gpu.graphs import DeviceGraphBackend

    return DeviceGraphBackend(pool)


def pinned_device_view(cpu_tensor: Any) -> Any:
    from vllm_platform_template.devices.gpu.views import device_view_of_pinned

    return device_view_of_pinned(cpu_tensor)


DEVICE = TemplateDevice(
    name=__name__.split(".")[-2],  # this folder's name
    torch_device_type=IDENTITY.device_type,
    ir_provider=IR_PROVIDER,
    status=triton_available,
    kernels=kernel_table,
    load_libraries=load_libraries,
    ir_ops=("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"),
    fused_add_rms_norm_inplace=True,
    graph_backend=graph_backend,
    attention=attention_kernels,
    # Inductor's generated code sits close to copy bandwidth for all three IR ops on a
    # GPU (measure yours: `vllm-template bench-ops --for-regime graph`): in the graph
    # stage they stay native.
    native_under_inductor=("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"),
    uses_graph_pool=True,
    # Whole steps: Model Runner V2 records them with torch.<module>.<graph_api>, the V1
    # runner with torch.accelerator.Graph through the platform's FULL wrapper (whether
    # the attention kernels allow FULL graphs is theirs to say: full_graphs).
    records_whole_steps=IDENTITY.graph_api is not None,
    whole_steps_on_v1=IDENTITY.graph_api == ACCELERATOR_GRAPH,
    pinned_device_view=pinned_device_view,
    packages=("triton",),
)

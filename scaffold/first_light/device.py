"""The device object: ``DEVICE``, what the rest of the plugin asks about this device.

First light (docs/porting-guide.md, "6. Reference kernels and attention"): the
kernel table is ``kernels/``'s and the attention kernels ``attention_kernels.py``'s,
the reference kernels (plain torch, ``vllm_platform_template/reference_kernels/``)
and the reference paged attention until the device's extension registers its own;
both run on any device torch can drive. Speed: the device's own, one at a time
(docs/porting-guide.md, "10. Kernels: IR providers and custom ops" and "11.
Attention kernels"); ``identity.py`` names torch's device-neutral graphs
(``torch.accelerator.Graph``), which ``graphs.py`` captures with where the extension
registers them (``availability.graph_api``; docs/porting-guide.md, "13. Graph
capture"): FULL decode graphs once the attention kernels are the device's.

vLLM hooks served (through the layers that read ``DEVICE``): the IR / CustomOp
kernel table (``ir_impls``, ``custom_ops``), the attention kernels of
``TEMPLATE_ATTN``, the graph backend of the graph wrapper, the IR op priorities
and graph defaults of the config policy, LoRA's punica wrapper
(``Platform.get_punica_wrapper``: ``lora/punica.py``, plain torch). Read by
``vllm_platform_template.device.device_for``; imports no vLLM and no platform
code. Proven by ``tests/devices/gpu/test_gpu_first_light.py`` (eager engines on the
device, tokens equal to transformers), ``tests/devices/gpu/test_gpu_full_graphs.py``
(the device's kernels in FULL decode graphs), ``tests/shared/test_attention_backend.py``
(the attention path) and ``tests/shared/test_custom_op_registration.py``.
"""

from __future__ import annotations

from typing import Any

from vllm_platform_template.device import (
    LORA_PUNICA_WRAPPER,
    AttentionKernels,
    KernelTable,
    TemplateDevice,
)
from vllm_platform_template.devices.gpu import kernels
from vllm_platform_template.devices.gpu.availability import graph_api
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY


def kernel_table() -> KernelTable:
    return KernelTable(
        rms_norm=kernels.rms_norm,
        rms_norm_supports=kernels.supports,
        fused_add_rms_norm=kernels.fused_add_rms_norm,
        fused_add_rms_norm_supports=kernels.supports,
        gelu_and_mul_sparse=kernels.gelu_and_mul_sparse,
        gelu_and_mul_sparse_supports=kernels.supports,
        silu_and_mul=kernels.silu_and_mul,
        rotary_embedding_=kernels.rotary_embedding_,
        w8a8_int8_linear=kernels.w8a8_int8_linear,
        fused_moe=kernels.fused_moe,
        fused_moe_w8a8_int8=kernels.fused_moe_w8a8_int8,
    )


def attention_kernels() -> AttentionKernels:
    from vllm_platform_template.devices.gpu.attention_kernels import attention_kernels

    return attention_kernels()


def kernels_in_use() -> str:
    """Which kernels the table serves here, for reports."""
    if not kernels.DEVICE_KERNELS:
        return "the reference kernels (plain torch): first light"
    return f"the device's {', '.join(kernels.DEVICE_KERNELS)}; the reference kernels otherwise"


def graph_backend(pool: Any) -> Any:
    from vllm_platform_template.devices.gpu.graphs import DeviceGraphBackend

    return DeviceGraphBackend(pool)


DEVICE = TemplateDevice(
    name=__name__.split(".")[-2],  # this folder's name
    torch_device_type=IDENTITY.device_type,
    ir_provider=f"template_{IDENTITY.device_type}",
    status=lambda: (True, kernels_in_use()),
    kernels=kernel_table,
    load_libraries=lambda: None,  # the reference kernels are torch's
    ir_ops=("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"),
    fused_add_rms_norm_inplace=False,  # the reference returns new tensors
    graph_backend=graph_backend,
    attention=attention_kernels,
    punica_wrapper=LORA_PUNICA_WRAPPER,  # LoRA's operators in plain torch
    # With torch.accelerator.Graph (identity.py names it; the extension registers it), the
    # device records whole decode steps in the V1 runner (graph_wrapper/full.py) where the
    # attention kernels allow it.
    uses_graph_pool=graph_api() is not None,
    records_whole_steps=graph_api() == ACCELERATOR_GRAPH,
    whole_steps_on_v1=graph_api() == ACCELERATOR_GRAPH,
)

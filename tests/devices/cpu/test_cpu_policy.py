"""The config policy's device defaults on the CPU reference backend, beside the CUDA folder's.

Proves what the two device folders of the full plugin give the policy: graph
defaults (the CPU: no graphs by default and few capture sizes; the CUDA folder:
vLLM's), default vLLM IR priorities per compile mode and stage (``template_cpu``
but where Inductor does better under compilation; the CUDA folder's Triton
kernels eagerly, native under compilation), ops taken from vLLM's registry, and
the CustomOp road leaving the norms to the layers.
"""

from __future__ import annotations

from vllm_platform_template.device import device_for
from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.platform_hooks import policy
from vllm_platform_template.platform_hooks.policy import MODE_NONE, MODE_VLLM_COMPILE

IR_OPS = ("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse")


def test_graph_defaults() -> None:
    cpu, gpu = device_for("cpu"), device_for(IDENTITY.device_type)
    assert cpu is not None and gpu is not None
    assert cpu.default_graph_mode == "NONE"
    assert gpu.default_graph_mode is None
    assert cpu.max_capture_size(256, 1) == 16
    assert cpu.max_capture_size(4, 1) == 8
    assert gpu.max_capture_size(256, 1) is None


def priorities(
    device_type: str, mode: int, stage: str, ops=IR_OPS, road: str = "ir"
) -> dict[str, list[str]]:
    """The device's default IR priorities, as its platform computes them."""
    device = device_for(device_type)
    assert device is not None
    return policy.default_ir_op_priority(
        device.ir_provider, device.ir_ops, device.native_under_inductor, mode, stage, ops, road
    )


def test_default_ir_priorities_are_compile_aware() -> None:
    eager = priorities("cpu", MODE_NONE, "graph")
    graph = priorities("cpu", MODE_VLLM_COMPILE, "graph")
    fusion = priorities("cpu", MODE_VLLM_COMPILE, "fusion_only")
    assert eager["rms_norm"] == ["template_cpu", "native"]
    assert graph["gelu_and_mul_sparse"] == ["native"]
    assert graph["rms_norm"] == ["template_cpu", "native"]
    assert fusion == eager
    gpu_graph = priorities(IDENTITY.device_type, MODE_VLLM_COMPILE, "graph")
    assert all(p == ["native"] for p in gpu_graph.values())
    gpu_eager = priorities(IDENTITY.device_type, MODE_NONE, "graph")
    assert all(p == ["template_triton", "native"] for p in gpu_eager.values())


def test_ir_priorities_follow_vllms_registry() -> None:
    """Ops come from vLLM's registry: one the plugin has no kernel for stays native."""
    from vllm.ir.op import IrOp

    import vllm_platform_template.ir_impls  # noqa: F401  (the providers)

    registry = list(IrOp.registry)
    result = priorities("cpu", MODE_NONE, "graph", [*registry, "new_op"])
    assert list(result) == [*registry, "new_op"]
    assert result["new_op"] == ["native"]
    for device_type in DEVICE_PACKAGES:
        device = device_for(device_type)
        assert device is not None
        assert set(device.ir_ops) <= set(registry), "an IR op a device serves left vLLM"


def test_custom_op_road_leaves_norms_to_the_layers() -> None:
    road = priorities("cpu", MODE_NONE, "graph", road="custom_op")
    assert road["rms_norm"] == road["fused_add_rms_norm"] == ["native"]
    assert road["gelu_and_mul_sparse"] == ["template_cpu", "native"]
    assert policy.custom_ops_for_road("custom_op", ["none"]) == ["+RMSNorm"]
    assert policy.custom_ops_for_road("custom_op", ["none", "+RMSNorm"]) == []
    assert policy.custom_ops_for_road("ir", ["none"]) == []

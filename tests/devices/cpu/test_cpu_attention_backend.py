"""TEMPLATE_ATTN on the CPU reference backend: vLLM's CPU attention kernels behind the glue.

Proves, engine-free, that on the CPU ``auto`` resolves to the CPU kernels where
they serve the layer (and to the reference where they do not), that the
backend refuses a head size they do not serve, and that the builder and impl
run a step on the kernel path with outputs equal to the reference path's, with
the kernels' work split prepared once per step and metadata from the other
path refused.
"""

from __future__ import annotations

import pytest
import torch
from attention_steps import (
    BLOCK_SIZE,
    HEAD_SIZE,
    NUM_BLOCKS,
    NUM_HEADS,
    NUM_KV_HEADS,
    make_builder,
    make_step,
    run_step,
    selector,
)

from vllm_platform_template.attention.backend import TemplateAttentionBackend, TemplateAttentionImpl
from vllm_platform_template.attention.kernel_choice import resolve_attention_kernels
from vllm_platform_template.devices.cpu import attention_kernels as cpu
from vllm_platform_template.devices.cpu import vllm_cpu_build

vllm_cpu_build.load_cpu_kernels()  # vLLM's ISA build fills torch.ops._C

CPU_KERNELS_OK, CPU_KERNELS_WHY = cpu.available()


@pytest.mark.parametrize(
    ("requested", "expected"),
    [("auto", "cpu_kernels" if CPU_KERNELS_OK else "reference"), ("reference", "reference")],
)
def test_attention_kernels_on_the_cpu(requested: str, expected: str) -> None:
    kernels = resolve_attention_kernels("cpu", requested, torch.float32, 16, 64)
    assert kernels.name == expected


def test_cpu_kernels_fall_back_for_a_head_size_they_do_not_serve() -> None:
    assert resolve_attention_kernels("cpu", "auto", torch.float32, 16, 40).name == "reference"


def test_validate_configuration_names_a_head_size_the_cpu_kernels_do_not_serve() -> None:
    """The backend's head sizes are the current device's kernels' (here the CPU's)."""
    reasons = TemplateAttentionBackend.validate_configuration(
        device_capability=None,  # type: ignore[arg-type]
        **selector(head_size=40)._asdict(),
    )
    assert any("head_size not supported" in r for r in reasons), reasons


@pytest.mark.skipif(not CPU_KERNELS_OK, reason=CPU_KERNELS_WHY)
def test_builder_and_impl_cpu_kernel_path_matches_reference() -> None:
    kernel_output, path = run_step("auto")
    assert path == "cpu_kernels"
    reference_output, _ = run_step("reference")
    torch.testing.assert_close(kernel_output, reference_output, atol=2e-5, rtol=2e-5)


@pytest.mark.skipif(not CPU_KERNELS_OK, reason=CPU_KERNELS_WHY)
def test_builder_prepares_the_cpu_kernels_work_split_once_per_step() -> None:
    cm, _ = make_step()
    plan = make_builder("auto", torch.float32).build(0, cm).plan
    assert isinstance(plan, torch.Tensor) and plan.dtype == torch.int8
    assert make_builder("reference", torch.float32).build(0, cm).plan is None


@pytest.mark.skipif(not CPU_KERNELS_OK, reason=CPU_KERNELS_WHY)
def test_impl_refuses_metadata_from_another_path() -> None:
    cm, t = make_step()
    metadata = make_builder("reference", torch.float32).build(0, cm)
    impl = TemplateAttentionImpl(NUM_HEADS, HEAD_SIZE, 0.125, NUM_KV_HEADS)  # "auto": kernels
    kv_cache = torch.zeros(NUM_BLOCKS, NUM_KV_HEADS, BLOCK_SIZE, 2 * HEAD_SIZE)
    args = (t["query"], t["key"], t["value"], kv_cache, metadata, torch.empty_like(t["query"]))
    with pytest.raises(RuntimeError, match="disagree"):
        impl.forward(torch.nn.Module(), *args)

"""First light of the device folder on its device: eager engines, tokens equal transformers'.

The device is the one ``identity.py`` names, present here (torch sees one):
the device this project's folder was written for (its device tier); the PrivateUse1 test device
``npu`` (``tests/test_device``, registered where ``NPU_TEST_DEVICE=1``) for a
plugin generated with ``new acme --device npu``, whose CI runs this file there.
One engine in the probe's process (``device_probe.py``: vLLM's engine core and
worker in one process, so the device's own operator counts can be read) and,
on two devices, one tensor-parallel engine over the identity's
``torch.distributed`` backend. Asserted: greedy tokens equal transformers' (fp32,
CPU); the folder's platform ran eagerly with ``TEMPLATE_ATTN``; the weights and
the KV cache are tensors of the device, counted by its allocator; the kernel
table's operators were dispatched to the device and vLLM reached its runtime
(allocator, pinned memory, events, guard: where it counts them, as the test
device does); two devices give the tokens of one. The first-light tier itself is
``availability.HOOKS``'; docs/porting-guide.md, "Eager mode: the first token".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from device_probe import run_in_child
from hf_reference import decoding_of

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.platform import TemplateGpuPlatform

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.xdist_group("first_light"),  # one worker: the module's engines are shared
    pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {IDENTITY.device_type} device"),
]

# The test device without kernels of its own, as a vendor's extension is at first light
# (tests/test_device: NPU_TEST_DEVICE_KERNELS); any other device ignores it.
TEST_DEVICE_KERNELS_ENV = "NPU_TEST_DEVICE_KERNELS"
PLATFORM = f"{TemplateGpuPlatform.__module__}.{TemplateGpuPlatform.__qualname__}"
DEVICE = IDENTITY.device_type
# A fixed KV cache, a small share of the device's memory at start, few sequences.
ENGINE = {"max_num_seqs": 8, "gpu_memory_utilization": 0.05, "kv_cache_memory_bytes": 64 << 20}
DEMO = ("--device", DEVICE, "--enforce-eager")
# What the reference kernels and attention run as (reference_kernels/reference.py,
# reference_kernels/paged_attention/reference.py), as the device sees them: RMSNorm, SiLU-and-mul,
# the KV-cache write and the matmuls around them (torch dispatches a structured
# operator to a device by its out= form).
REFERENCE_KERNEL_OPERATORS = (
    "aten::rsqrt.out",
    "aten::silu.out",
    "aten::_index_put_impl_",
    "aten::mm.out",
)


def probe_on_device(tmp_path_factory: pytest.TempPathFactory, *demo_args: str) -> dict:
    """One eager engine on the device in the probe's process: its demo report and log."""
    return run_in_child(
        tmp_path_factory.mktemp("first-light-cache"),
        *DEMO,
        *demo_args,
        "--engine-args",
        json.dumps(ENGINE),
        env={TEST_DEVICE_KERNELS_ENV: "0"},  # first light: the reference kernels
    )


@pytest.fixture(scope="module")
def one_device(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return probe_on_device(tmp_path_factory)


def test_the_folder_generates_transformers_tokens(one_device, hf_greedy) -> None:
    expected = hf_greedy(one_device["prompt_token_ids"], **decoding_of(one_device))
    assert one_device["tokens"] == expected
    assert all(len(tokens) == 32 for tokens in one_device["tokens"])


def test_what_ran_is_the_folders_platform_eagerly(one_device) -> None:
    assert (one_device["platform"], one_device["device"]) == (PLATFORM, DEVICE)
    assert one_device["compilation_mode"] == "NONE"
    assert one_device["cudagraph_mode"] == "NONE"
    assert one_device["attention_backends"] == ["TEMPLATE_ATTN"]
    if IDENTITY.kernel_compiler is None:
        assert (
            "first light: eager, V1 model runner, synchronous scheduling" in one_device["_stderr"]
        )
    # no traceback but vLLM's for another plugin it found and could not load
    stderr = one_device["_stderr"]
    foreign = stderr.count("Failed to load plugin ") - stderr.count(
        "Failed to load plugin template\n"
    )
    assert stderr.count("Traceback") == foreign, stderr[-6000:]


def test_weights_and_kv_cache_are_in_the_devices_memory(one_device) -> None:
    placement = one_device["placement"]
    assert placement["weights"] == [f"{DEVICE}:0"]
    assert placement["kv_cache"] == [f"{DEVICE}:0"]
    assert placement["kv_cache_bytes"] >= ENGINE["kv_cache_memory_bytes"] * 0.9
    # the device's allocator holds them (torch.accelerator's count of the device)
    in_device_memory = placement["device_memory_allocated"]
    assert in_device_memory >= placement["weight_bytes"] + placement["kv_cache_bytes"]


def _not_counted(report: dict, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` the device counted no call of (skips where it counts nothing)."""
    counts = report["device_dispatch"]
    if counts is None:
        pytest.skip(f"{DEVICE} does not count the calls it serves (the test device does)")
    return [name for name in names if counts.get(name, 0) == 0]


def test_the_kernel_tables_operators_ran_on_the_device(one_device) -> None:
    missing = _not_counted(one_device, REFERENCE_KERNEL_OPERATORS)
    assert not missing, f"not dispatched to {DEVICE}: {missing}"


FALLBACK = "cpu_fallback:"  # the test device's count of an operator its fallback served


def test_the_operators_left_to_the_devices_cpu_fallback_are_listed(one_device, capsys) -> None:
    """Each operator the device does not own ran through its CPU fallback: printed with its
    count (the list a port's extension implements to run the same steps on its own); the
    linear layers' matmul is one (the test device owns no matmul)."""
    counts = one_device["device_dispatch"]
    if counts is None:
        pytest.skip(f"{DEVICE} does not count the calls it serves (the test device does)")
    fallback = {k.removeprefix(FALLBACK): n for k, n in counts.items() if k.startswith(FALLBACK)}
    with capsys.disabled():
        print(f"\n{DEVICE}, one eager engine: {len(fallback)} operators ran on its CPU fallback")
        for name, calls in sorted(fallback.items(), key=lambda item: (-item[1], item[0])):
            print(f"{calls:>9}  {name}")
    assert fallback.get("aten::mm.out", 0) > 0, sorted(fallback)


# The device runtime's hooks vLLM reached (the test device counts them beside the operators):
# the allocator's memory info (the KV cache is sized from it), pinned host buffers (the
# model runner's inputs), events (its output copies), the guard's current device.
RUNTIME_HOOKS = (
    "runtime::DeviceAllocator::getMemoryInfo",
    "runtime::HostAllocator::allocate",
    "runtime::Guard::recordEvent",
    "runtime::Guard::setDevice",
)


def test_vllm_used_the_devices_runtime(one_device) -> None:
    missing = _not_counted(one_device, RUNTIME_HOOKS)
    assert not missing, f"{DEVICE}'s runtime not reached: {missing}"


@pytest.mark.skipif(torch.accelerator.device_count() < 2, reason=f"needs two {DEVICE} devices")
def test_two_devices_generate_the_tokens_of_one(one_device, engine_runs) -> None:
    """Tensor parallel over the identity's ``torch.distributed`` backend, one rank a device."""
    two = engine_runs.run(*DEMO, "--engine-args", json.dumps({**ENGINE, "tensor_parallel_size": 2}))
    assert (two["platform"], two["placement"]["weights"]) == (PLATFORM, [f"{DEVICE}:0"])
    assert two["tokens"] == one_device["tokens"]


@pytest.fixture(scope="module")
def moe_on_device(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The mixture-of-experts model (tiny-moe) eagerly on the device, in the probe."""
    return probe_on_device(tmp_path_factory, "--size", "tiny-moe", "--no-perplexity")


def test_the_moe_model_runs_the_kernel_tables_experts_on_the_device(
    moe_on_device, hf_greedy_of
) -> None:
    """vLLM's FusedMoE layers on the plugin's MoE method, its experts kernel (the kernel
    table's fused_moe) called on the device; tokens equal transformers' (fp32, CPU)."""
    assert moe_on_device["moe_methods"] == {"TemplateFusedMoEMethod": 2}
    assert moe_on_device["template_op_calls"]["fused_moe"].get(DEVICE, 0) >= 2 * 31
    assert moe_on_device["placement"]["weights"] == [f"{DEVICE}:0"]
    generate = hf_greedy_of(Path(moe_on_device["model"]))
    expected = generate(moe_on_device["prompt_token_ids"], **decoding_of(moe_on_device))
    assert moe_on_device["tokens"] == expected

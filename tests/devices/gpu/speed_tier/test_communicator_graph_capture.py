"""Graph capture under tensor/pipeline parallel reaches the template communicator.

vLLM's model runner enters ``GroupCoordinator.graph_capture`` for the TP and PP
groups around every capture; unpatched, it asserts that the group's device
communicator is vLLM's CUDA or XPU one, which killed TP=2 + graphs on the GPU
platform. This runs vLLM's real ``GroupCoordinator.graph_capture`` with the
template GPU communicator on a one-rank gloo group on the CPU (the communicator
takes its streams from ``torch.get_device_module(device)``, so the same code
runs with ``torch.cpu``'s streams here and the device's on the device).
"""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase,
)
from vllm.distributed.parallel_state import GraphCaptureContext, GroupCoordinator

from vllm_platform_template.devices.gpu import patches as gpu_patches
from vllm_platform_template.devices.gpu.communicator import TemplateGpuCommunicator
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.patches import all_patches


@pytest.fixture(scope="module")
def world() -> object:
    if dist.is_initialized():
        yield dist.group.WORLD
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def group_with(communicator: object) -> GroupCoordinator:
    """A ``GroupCoordinator`` holding ``communicator`` (nothing else of it is used)."""
    group = object.__new__(GroupCoordinator)
    group.device_communicator = communicator  # type: ignore[assignment]
    return group


@pytest.fixture
def unpatched_graph_capture(monkeypatch):
    original = GroupCoordinator.graph_capture
    while getattr(original, "__template_patched__", False):
        original = original.__wrapped_original__  # type: ignore[attr-defined]
    monkeypatch.setattr(GroupCoordinator, "graph_capture", original)
    return original


def test_vllm_refuses_an_oot_communicator_without_the_patch(world, unpatched_graph_capture):
    communicator = TemplateGpuCommunicator(world, torch.device("cpu"), world)
    context = GraphCaptureContext(torch.cpu.Stream())
    with pytest.raises(AssertionError), group_with(communicator).graph_capture(context):
        pass


def test_patched_capture_runs_on_the_communicators_stream(world, unpatched_graph_capture):
    gpu_patches._oot_communicator_graph_capture()
    communicator = TemplateGpuCommunicator(world, torch.device("cpu"), world)
    context = GraphCaptureContext(torch.cpu.Stream())
    with group_with(communicator).graph_capture(context) as ctx:
        assert ctx is context
        x = torch.ones(4)
        assert communicator.all_reduce(x) is x
        assert torch.equal(x, torch.ones(4)), "one rank: the sum is the tensor itself"
    with group_with(communicator).graph_capture() as made:
        assert isinstance(made, GraphCaptureContext)
        assert made.stream is not None


def test_patched_capture_leaves_other_communicators_to_vllm(world, unpatched_graph_capture):
    """A communicator without ``graph_capture`` still gets vLLM's own context (and assert)."""
    gpu_patches._oot_communicator_graph_capture()
    plain = DeviceCommunicatorBase(world, torch.device("cpu"), world)
    context = GraphCaptureContext(torch.cpu.Stream())
    with pytest.raises(AssertionError), group_with(plain).graph_capture(context):
        pass


def test_the_patch_is_registered_for_the_gpu_platform() -> None:
    entry = next(p for p in all_patches() if p.name == "oot_communicator_graph_capture")
    assert IDENTITY.device_type in entry.devices and "cpu" not in entry.devices
    assert entry.apply is gpu_patches._oot_communicator_graph_capture

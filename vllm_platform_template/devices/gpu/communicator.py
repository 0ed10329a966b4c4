"""Collectives between the device's ranks (tensor and pipeline parallel).

vLLM hook: ``Platform.get_device_communicator_cls``. vLLM builds one
communicator per parallel group with a CPU group (gloo) and a device group
created with the platform's ``dist_backend`` (the identity's: "nccl" for CUDA),
even for one rank. The base class already runs every collective through
``torch.distributed`` on the device group, which is what this platform wants:
the device's collective library via torch, nothing compiled by vLLM (vLLM's
``CudaCommunicator`` adds its own custom all-reduce kernels and
symmetric-memory paths, which need ``vllm._C``). A device whose collective
library has a torch.distributed backend (HCCL, XCCL, ...) names it in
``identity.py``; one with faster device collectives overrides
``all_reduce``/``all_gather`` here (docs/porting-guide.md, "5. Communicator").

Graph capture: vLLM's ``GroupCoordinator.graph_capture`` (entered by the model
runner around every capture) only knows its own CUDA and XPU communicators and
asserts on any other. :meth:`TemplateGpuCommunicator.graph_capture` is what that
context does for this communicator (capture on a side stream that waits for the
current one; collectives issued through torch.distributed on that stream are
recorded into the graph), and the patch registry's ``oot_communicator_graph_capture``
routes vLLM's call to it.

The platform names this class once the identity names a graph class of the
device module; in first light, and for ``torch.accelerator.Graph`` (whose capture
context the patch gives with ``torch.Stream``), vLLM's own ``DeviceCommunicatorBase``,
which does the same collectives. Proven by
``tests/devices/gpu/speed_tier/test_communicator_graph_capture.py``
(vLLM's real ``graph_capture`` on one CPU rank) and, on two devices, the device
tier's tensor- and pipeline-parallel tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase,
)
from vllm.distributed.parallel_state import GraphCaptureContext


class TemplateGpuCommunicator(DeviceCommunicatorBase):
    """torch.distributed collectives on the device group (the identity's ``dist_backend``)."""

    @contextlib.contextmanager
    def graph_capture(
        self, graph_capture_context: GraphCaptureContext | None = None
    ) -> Iterator[GraphCaptureContext]:
        """Run a capture on the context's stream, after the work already queued."""
        module = torch.get_device_module(self.device.type)
        if graph_capture_context is None:
            graph_capture_context = GraphCaptureContext(module.Stream())
        stream = graph_capture_context.stream
        current = module.current_stream()
        if current != stream:
            stream.wait_stream(current)
        with module.stream(stream):
            yield graph_capture_context

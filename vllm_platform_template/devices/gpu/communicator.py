"""Collectives between the GPU platform's ranks (tensor and pipeline parallel).

vLLM hook: ``Platform.get_device_communicator_cls``. vLLM builds one
communicator per parallel group with a CPU group (gloo) and a device group
created with the platform's ``dist_backend`` ("nccl" here). The base class
already runs every collective through ``torch.distributed`` on the device
group, which is what this platform wants: NCCL via torch, nothing compiled by
vLLM (vLLM's ``CudaCommunicator`` adds its own custom all-reduce kernels and
symmetric-memory paths, which need ``vllm._C``). A vendor whose collective
library has a torch.distributed backend (HCCL, XCCL, ...) does the same; one
with faster device collectives overrides ``all_reduce``/``all_gather`` here.
"""

from __future__ import annotations

from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase,
)


class TemplateGpuCommunicator(DeviceCommunicatorBase):
    """torch.distributed collectives on the NCCL device group."""

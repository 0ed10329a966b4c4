"""``npuccl``: the test device's ``torch.distributed`` backend (``Backend.register_backend``).

A device's collective library moves bytes between device memories; this one's
device memory is host memory, so each collective runs torch's Gloo backend on
host views of the same bytes (:func:`npu_test_device.host_view`): results land in
the npu tensors in place, no copy. Ranks on one host talk over Gloo's TCP
transport, the store and timeout ``init_process_group`` / ``new_group`` give.
It serves the collectives vLLM's ``DeviceCommunicatorBase`` calls (all-reduce,
all-gather, reduce-scatter, gather, broadcast, send/recv, all-to-all, barrier), under the
names torch 2.13's ``torch.distributed`` calls a ``ProcessGroup`` by..
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

import npu_test_device


def _host(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [npu_test_device.host_view(t) for t in tensors]


class NpuProcessGroup(dist.ProcessGroup):
    """One group of ranks, each with its npu tensors; Gloo moves the bytes."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._name = ""

    def getBackendName(self) -> str:
        return npu_test_device.DIST_BACKEND

    # torch names a group through its C++ backends; this group is Python, so it keeps its own
    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        return self._name

    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        return self._gloo.allreduce(_host(tensors), opts)

    def allgather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor],
                  opts: Any) -> Any:  # fmt: skip
        return self._gloo.allgather([_host(o) for o in outputs], _host(inputs), opts)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> Any:
        host_out, host_in = _host([output, input])
        return self._gloo._allgather_base(host_out, host_in, opts)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> Any:
        host_out, host_in = _host([output, input])
        return self._gloo._reduce_scatter_base(host_out, host_in, opts)

    def reduce_scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]],
                       opts: Any) -> Any:  # fmt: skip
        return self._gloo.reduce_scatter(_host(outputs), [_host(i) for i in inputs], opts)

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor],
               opts: Any) -> Any:  # fmt: skip
        return self._gloo.gather([_host(o) for o in outputs], _host(inputs), opts)

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        return self._gloo.reduce(_host(tensors), opts)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        return self._gloo.broadcast(_host(tensors), opts)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,
                      output_split_sizes: list[int], input_split_sizes: list[int],
                      opts: Any) -> Any:  # fmt: skip
        host_out, host_in = _host([output, input])
        return self._gloo.alltoall_base(
            host_out, host_in, output_split_sizes, input_split_sizes, opts
        )

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> Any:
        return self._gloo.send(_host(tensors), dst, tag)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> Any:
        return self._gloo.recv(_host(tensors), src, tag)

    def barrier(self, opts: Any) -> Any:
        return self._gloo.barrier(opts)


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> NpuProcessGroup:
    return NpuProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Make ``npuccl`` a ``torch.distributed`` backend for npu (and host) tensors."""
    if npu_test_device.DIST_BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(
            npu_test_device.DIST_BACKEND, _create, devices=[npu_test_device.NAME, "cpu"]
        )

"""The device folder's graph backend on ``torch.accelerator.Graph`` (``graphs.py``).

Where the identity's ``graph_api`` is ``"accelerator"``, the backend captures
through torch's device-neutral graph API instead of ``torch.<module>.graph``.
Checked on the PrivateUse1 test device, which registers its implementation
(``csrc/graphs.cpp``), with the folder's identity set to it in a child process:
the availability check finds the API, a capture on the default stream moves to a
side stream, records without running, replays into the same memory from the
platform's graph pool (``torch.npu.graph_pool_handle``, the id vLLM's
``get_global_graph_pool`` takes), keeps its outputs as they are (no array
interface for non-owning views), and a capture that breaks the device's rules
fails with the device's message (``TemplateGraphWrapper`` then runs that size eagerly).
"""

from __future__ import annotations

import pytest

pytest.importorskip("npu_test_device")

from test_device_child import run_with_test_device


@pytest.fixture(scope="module")
def captured() -> dict:
    return run_with_test_device(
        """
        import dataclasses, json, torch, npu_test_device as d
        from vllm_platform_template.devices.gpu import availability, graphs, identity

        npu = dataclasses.replace(
            identity.IDENTITY, device_type="npu", torch_module="npu", dispatch_key="PrivateUse1",
            dist_backend="npuccl", graph_api=identity.ACCELERATOR_GRAPH, kernel_compiler=None,
            array_interface=None)
        graphs.IDENTITY = npu
        out = {"missing": availability._graph_api_missing(npu, npu.graph_api, torch.npu)}

        pool = torch.npu.graph_pool_handle()
        backend = graphs.DeviceGraphBackend(pool)
        x = torch.ones(4, device="npu")
        w = torch.full((4,), 2.0, device="npu")
        default_stream = torch.accelerator.current_stream()
        d.reset_dispatch_counts()
        handle = backend.capture(lambda: torch.nn.functional.silu(x * w) + 1)
        out["stream_after"] = torch.accelerator.current_stream() == default_stream
        out["pool"] = list(handle.handle.pool()) == list(pool)
        output = handle.output
        out["weak_output_is_output"] = backend.weak_output(output) is output
        out["ran_at_capture"] = d.host_view(output).tolist() == [
            torch.nn.functional.silu(torch.tensor(2.0)).item() + 1] * 4
        backend.replay(handle)
        out["first"] = output.cpu().tolist()
        x.fill_(3.0)
        backend.replay(handle)
        out["second"] = output.cpu().tolist()
        out["expected"] = [[torch.nn.functional.silu(torch.tensor(v)).item() + 1] * 4
                           for v in (2.0, 6.0)]
        out["replays"] = d.dispatch_counts().get("runtime::Graph::replay")
        shared = backend.capture(lambda: output * 2)
        out["shared_pool"] = shared.handle.pool() == handle.handle.pool()
        try:
            backend.capture(lambda: (x * 2).sum().item())
            out["refused"] = None
        except RuntimeError as error:
            out["refused"] = str(error).splitlines()[0]
        out["stream_after_refusal"] = torch.accelerator.current_stream() == default_stream
        print(json.dumps(out))
        """
    )


def test_the_identity_can_name_torch_accelerator_graph(captured) -> None:
    assert captured["missing"] is None


def test_a_piece_is_captured_on_a_side_stream_and_replayed_in_the_pool(captured) -> None:
    assert captured["stream_after"] and captured["pool"] and captured["shared_pool"]
    assert not captured["ran_at_capture"]
    assert captured["first"] == pytest.approx(captured["expected"][0])
    assert captured["second"] == pytest.approx(captured["expected"][1])
    assert captured["replays"] == 2


def test_outputs_stay_as_they_are_without_an_array_interface(captured) -> None:
    assert captured["weak_output_is_output"]


def test_a_capture_that_breaks_the_devices_rules_fails_with_its_message(captured) -> None:
    assert "invalidated by reading a value to the host" in captured["refused"]
    assert captured["stream_after_refusal"]

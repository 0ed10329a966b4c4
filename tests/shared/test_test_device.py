"""The PrivateUse1 test device (``tests/test_device``) answers torch as a real device would.

Each check runs in a child process with ``NPU_TEST_DEVICE=1`` (torch's device
backend autoload registers the device there), so this process keeps torch as
it is. What a vLLM engine needs of a device is covered piece by piece: tensors
in the device's own memory counted by its allocator, which the host cannot read
but through the device, views that write through, outputs a kernel resizes,
copies both ways, the operator fallback and its counts, pinned host memory,
generators, streams that run their work on threads of their own and events, two
devices, the out-of-memory error, ``torch.accelerator`` and ``torch.npu``, the
``npuccl`` collectives between two processes, and ``torch.accelerator.Graph``: capture
records without running, replays into the same memory, keeps its pool, and
refuses what a device graph must refuse.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("npu_test_device")

from test_device_child import run_with_test_device


def _run(code: str, **env: str):
    """``code`` on the test device under its default name (``npu``), whatever device type
    the tox env gives it (a generated plugin's env names the plugin's)."""
    return run_with_test_device(code, **{"NPU_TEST_DEVICE_NAME": "npu", **env})


@pytest.fixture(scope="module")
def device() -> dict:
    return _run(
        """
        import json, torch, npu_test_device as d
        out = {"accelerator": str(torch.accelerator.current_accelerator()),
               "count": torch.accelerator.device_count(), "module": torch.npu.__name__}
        before = torch.accelerator.memory_allocated(0)
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("npu")
        out["device"] = str(x.device)
        out["allocated"] = torch.accelerator.memory_allocated(0) - before
        free, total = torch.accelerator.get_memory_info(0)
        out["memory_info"] = [free, total]
        column = x[:, 1]
        column.add_(100)  # a view on the device writes into the tensor's memory
        out["through_view"] = x.cpu()[:, 1].tolist()
        out["host_view_shares_bytes"] = d.host_view(x).data_ptr() == x.data_ptr()
        grown = torch.empty(0, device="npu")
        torch.cat([x, x], out=grown)  # the CPU kernel resizes the out= tensor
        out["grown"] = [list(grown.shape), str(grown.device), grown.cpu()[3].tolist()]
        d.reset_dispatch_counts()
        y = torch.mm(x, x.t())
        out["counts"] = d.dispatch_counts()
        out["mm"] = torch.equal(y.cpu(), x.cpu() @ x.cpu().t())
        out["bf16"] = (x.to(torch.bfloat16).cpu().float() == x.cpu()).all().item()
        pinned = torch.ones(4).pin_memory()
        out["pinned"] = [pinned.is_pinned(), torch.ones(4).is_pinned()]
        g = torch.Generator(device="npu")
        g.manual_seed(7); a = torch.randn(5, device="npu", generator=g)
        g.manual_seed(7); b = torch.randn(5, device="npu", generator=g)
        c = torch.randn(5, device="npu", generator=g)
        out["generator"] = [torch.equal(a.cpu(), b.cpu()), torch.equal(b.cpu(), c.cpu())]
        start = torch.Event(device="npu", enable_timing=True)
        end = torch.Event(device="npu", enable_timing=True)
        stream = torch.Stream(device="npu")
        start.record(stream); end.record(stream); end.synchronize()
        out["events"] = [end.query(), start.elapsed_time(end) >= 0, stream.query()]
        torch.accelerator.set_device_index(1)
        on_one = torch.ones(3, device="npu")
        out["second_device"] = [str(on_one.device), torch.accelerator.memory_allocated(1)]
        torch.accelerator.synchronize()
        out["capability"] = torch.bfloat16 in torch.accelerator.get_device_capability(0)[
            "supported_dtypes"]
        try:
            torch.empty(1 << 40, dtype=torch.uint8, device="npu")
            out["oom"] = None
        except torch.OutOfMemoryError as error:
            out["oom"] = str(error).splitlines()[0]
        out["properties"] = torch.npu.get_device_properties(0).total_memory
        print(json.dumps(out))
        """,
        NPU_TEST_DEVICE_MEMORY=str(1 << 30),
    )


def test_torch_knows_the_device_by_name(device) -> None:
    assert (device["accelerator"], device["count"], device["device"]) == ("npu", 2, "npu:0")
    assert device["module"] == "npu_test_device.device_module"


def test_tensors_live_in_the_devices_own_memory(device) -> None:
    assert device["allocated"] >= 12 * 4
    free, total = device["memory_info"]
    assert total == 1 << 30 and free == total - device["allocated"]
    assert device["properties"] == 1 << 30
    assert device["host_view_shares_bytes"]


def test_views_and_resized_outputs_behave_as_on_a_device(device) -> None:
    assert device["through_view"] == [101.0, 105.0, 109.0]
    assert device["grown"] == [[6, 4], "npu:0", [0.0, 101.0, 2.0, 3.0]]


def test_operators_run_on_the_device_and_are_counted(device) -> None:
    assert device["mm"] and device["bf16"]
    assert device["counts"].get("aten::mm.out") == 1
    assert device["counts"].get("aten::empty.memory_format", 0) >= 1


def test_runtime_pieces(device) -> None:
    assert device["pinned"] == [True, False]
    assert device["generator"] == [True, False]
    assert device["events"] == [True, True, True]
    assert device["second_device"] == ["npu:1", 12]
    assert device["capability"]
    # device 1 is the current one by then
    assert device["oom"] is not None and "npu:1 is out of memory" in device["oom"]


@pytest.fixture(scope="module")
def graphs() -> dict:
    return _run(
        """
        import json, torch, npu_test_device as d
        out = {}
        x = torch.ones(4, device="npu")
        w = torch.full((4,), 2.0, device="npu")
        stream = torch.Stream(device="npu")
        graph = torch.accelerator.Graph()
        before = torch.accelerator.memory_allocated(0)
        d.reset_dispatch_counts()
        with stream, graph:
            y = x * w + 1
            y.add_(torch.nn.functional.silu(y))
            y.copy_(y * 2)
            ranged = torch.arange(0, 4, device="npu")  # resizes an out= tensor at launch
        out["captured_counts"] = d.dispatch_counts()
        out["ranged_at_capture"] = list(ranged.shape)
        del ranged
        out["pool_bytes"] = torch.accelerator.memory_allocated(0) - before
        y_ptr = y.data_ptr()
        out["untouched_by_capture"] = d.host_view(y).tolist() != [
            (3 + 3 / (1 + 2.718281828 ** -3)) * 2] * 4
        d.reset_dispatch_counts()
        graph.replay()
        out["first"] = y.cpu().tolist()
        x.fill_(3.0)
        graph.replay()
        out["second"] = y.cpu().tolist()
        seven = torch.full((4,), 7.0)
        out["expected_second"] = ((7 + torch.nn.functional.silu(seven)) * 2).tolist()
        out["replay_counts"] = {k: v for k, v in d.dispatch_counts().items()
                                if k.startswith(("replay:", "runtime::Graph"))}
        out["same_storage"] = y.data_ptr() == y_ptr

        # The pool outlives the tensors; a graph sharing it keeps it; the last one frees it.
        del y
        shared = torch.accelerator.Graph(pool=graph.pool())
        with stream, shared:
            z = x + 1
        out["shared_pool"] = shared.pool() == graph.pool()
        held = torch.accelerator.memory_allocated(0)
        del z, graph
        out["kept_by_sharer"] = torch.accelerator.memory_allocated(0) == held
        del shared
        out["freed_with_last"] = held - torch.accelerator.memory_allocated(0)

        def refused(action):
            graph = torch.accelerator.Graph()
            with stream:
                graph.capture_begin()
                try:
                    action()
                    error = None
                except RuntimeError as e:
                    error = str(e).splitlines()[0]
                try:
                    graph.capture_end()
                    ended = None
                except RuntimeError as e:
                    ended = str(e).splitlines()[0]
                graph.reset()
                with stream, graph:  # a reset graph captures again
                    (x + 1)
                return [error, ended]

        pinned = torch.zeros(4).pin_memory()
        out["refused"] = {
            "item": refused(lambda: (x * 2).sum().item()),
            "to_pageable": refused(lambda: (x * 2).cpu()),
            "from_pageable": refused(lambda: x.copy_(torch.ones(4))),
            "synchronize": refused(lambda: torch.accelerator.synchronize()),
            "data_dependent": refused(lambda: torch.nonzero(x)),
            "to_pinned": refused(lambda: pinned.copy_(x)),
        }
        try:
            torch.accelerator.Graph().capture_begin()
            out["default_stream"] = None
        except RuntimeError as e:
            out["default_stream"] = str(e).splitlines()[0]
        print(json.dumps(out))
        """
    )


def test_a_capture_records_and_does_not_run(graphs) -> None:
    assert graphs["untouched_by_capture"]
    assert graphs["ranged_at_capture"] == [4]  # out= results sized as at a launch
    assert graphs["captured_counts"].get("runtime::Graph::capture_end") == 1
    # results of captured operators are allocated at capture, from the graph's pool
    assert graphs["pool_bytes"] >= 3 * 4 * 4


def test_replay_reruns_the_record_on_the_same_memory(graphs) -> None:
    expected_first = (3 + 3 / (1 + 2.718281828459045**-3)) * 2
    assert graphs["first"] == pytest.approx([expected_first] * 4, rel=1e-6)
    assert graphs["second"] == pytest.approx(graphs["expected_second"], rel=1e-6)
    assert graphs["same_storage"]
    counts = graphs["replay_counts"]
    assert counts["runtime::Graph::replay"] == 2
    assert counts["replay:aten::silu.out"] == 2 and counts["replay:aten::mul.out"] == 4


def test_the_pool_lives_until_the_last_graph_sharing_it_goes(graphs) -> None:
    assert graphs["shared_pool"] and graphs["kept_by_sharer"]
    assert graphs["freed_with_last"] >= graphs["pool_bytes"]


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ("item", "reading a value to the host"),
        ("to_pageable", "copying to pageable host memory"),
        ("from_pageable", "copying from pageable host memory"),
        ("synchronize", "synchronizing the device"),
        ("data_dependent", "cannot be sized without running it"),
    ],
)
def test_what_a_device_graph_refuses_fails_and_invalidates_the_capture(
    graphs, action, says
) -> None:
    error, ended = graphs["refused"][action]
    assert error is not None and says in error and "is not allowed during capture" in error
    assert ended is not None and "invalidated by" in ended and says in ended


def test_copies_to_pinned_memory_are_captured(graphs) -> None:
    assert graphs["refused"]["to_pinned"] == [None, None]


def test_capture_on_the_default_stream_is_refused(graphs) -> None:
    assert "a stream other than the default stream" in graphs["default_stream"]


def test_an_unbuilt_device_says_how_to_build_it(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import torch"],
        env={
            **os.environ,
            "NPU_TEST_DEVICE": "1",
            "NPU_TEST_DEVICE_NAME": "npu",
            "XDG_CACHE_HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "run `python -m npu_test_device build`" in proc.stderr


# Work on a side stream while the host goes on: npu_test.sleep keeps the stream busy, as
# torch.cuda._sleep keeps an accelerator busy.
STREAMS = """
import json, torch
x = torch.zeros(4, device="npu")
side, out = torch.Stream(device="npu"), {}
with side:  # the first launch on a stream imports torch's meta kernels (1 s and more)
    x.add_(0)
side.synchronize()
with side:
    torch.ops.npu_test.sleep(x, 300)
    x.add_(1)
out["busy"] = [side.query(), x.cpu().tolist()]  # the default stream does not wait
side.synchronize()
out["synchronized"] = [side.query(), x.cpu().tolist()]
event = torch.Event(device="npu")
with side:
    torch.ops.npu_test.sleep(x, 200)
    x.add_(1)
    event.record(side)
out["event_pending"] = event.query()
torch.accelerator.current_stream().wait_event(event)
out["waited"] = [event.query(), x.cpu().tolist()]
with side:
    torch.ops.npu_test.sleep(x, 100)
    x.add_(1)
    out["item"] = x.sum().item()  # a value read to the host waits for its stream
    pinned = torch.zeros(4).pin_memory()
    pinned.copy_(x * 2, non_blocking=True)
    copied = torch.Event(device="npu")
    copied.record(side)
copied.synchronize()
out["pinned"] = pinned.tolist()
with side:
    torch.ops.npu_test.sleep(x, 100)
    # arange writes into an empty out= tensor, which it resizes on the host at launch
    ranged = torch.arange(0, 4, device="npu")
    out["sized_at_launch"] = list(ranged.shape)
side.synchronize()
out["ranged"] = ranged.cpu().tolist()
with side:
    torch.ops.npu_test.sleep(x, 100)
    # sized at launch, out of range when it runs (a device-side assert on hardware)
    torch.index_select(x, 0, torch.tensor([10], device="npu"))
try:
    side.synchronize()
    out["error"] = None
except Exception as error:  # raised at the synchronization, as the CPU kernel raised it
    out["error"] = f"{type(error).__name__}: {error}"
print(json.dumps(out))
"""


def test_work_on_a_stream_runs_on_its_own_thread_and_waits_where_hardware_waits() -> None:
    result = _run(STREAMS)
    assert result["busy"] == [False, [0.0] * 4]
    assert result["synchronized"] == [True, [1.0] * 4]
    assert result["event_pending"] is False
    assert result["waited"] == [True, [2.0] * 4]
    assert result["item"] == 12.0 and result["pinned"] == [6.0] * 4
    assert result["sized_at_launch"] == [4] and result["ranged"] == [0, 1, 2, 3]
    assert result["error"] == "IndexError: index out of range in self"


EVENT_THEN_QUERY = """
import json, torch
side, x = torch.Stream(device="npu"), torch.zeros(4, device="npu")
reached, idle = torch.Event(device="npu"), 0
for _ in range(%d):
    with side:
        x.add_(1)
    reached.record(side)
    reached.synchronize()
    idle += side.query()
print(json.dumps({"idle_after_event": idle}))
"""


def test_a_stream_is_idle_up_to_an_event_the_host_waited_for() -> None:
    """``event.synchronize()`` then ``stream.query()`` is True every time: the event
    completes in the step that counts the stream's work done. On a busy host (two processes
    spinning beside it) the stream's thread is often preempted between the two; when the
    event completed first, over a thousand of 20,000 queries here found the stream busy."""
    rounds = 20000
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        result = _run(EVENT_THEN_QUERY % rounds)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert result["idle_after_event"] == rounds


# A script that ends while a fresh stream still has work queued (its first launch, which
# takes a second, then a check that does not wait for it)
EXIT_WHILE_BUSY = """
import torch
x = torch.zeros(4, device="npu")
with torch.Stream(device="npu"):
    torch.ops.npu_test.sleep(x, 300)
    x.add_(1)
print("launched", flush=True)
"""


def test_a_process_that_ends_with_work_queued_waits_for_it_and_exits_cleanly() -> None:
    """The queued work runs before the interpreter finalizes, as an accelerator's context
    waits for its kernels at exit. Before, a stream's thread took the GIL while the
    interpreter finalized and aborted the process ("terminate called without an active exception",
    exit -6) in 4 of 6 runs: four runs here all failing to abort was 1 % likely."""
    env = {**os.environ, "NPU_TEST_DEVICE": "1", "NPU_TEST_DEVICE_NAME": "npu"}
    command = [sys.executable, "-c", EXIT_WHILE_BUSY]
    runs = [subprocess.Popen(command, env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(4)]  # fmt: skip
    for out, err, code in [(*proc.communicate(timeout=120), proc.returncode) for proc in runs]:
        assert (code, out) == (0, "launched\n"), err[-2000:]


# A host read of device memory through a pointer, as host code that mistakes a device
# tensor for a host one would make it; before it, the reads the device allows.
STRAY_READ = """
import ctypes, torch, npu_test_device as d
x = torch.full((4,), 7.0, device="npu")
view = d.host_view(x)
print("through a host view", ctypes.c_float.from_address(x.data_ptr()).value, flush=True)
del view
print("through a copy", x.cpu()[0].item(), flush=True)
ctypes.c_float.from_address(x.data_ptr()).value
print("read on the host", flush=True)
"""


def test_the_host_cannot_read_device_memory_but_through_the_device() -> None:
    """Device memory is closed to the host (as OpenReg's is): open while a host view of it
    lives (the device's operators, kernels and copies), a fault with a message otherwise."""
    proc = subprocess.run(
        [sys.executable, "-c", STRAY_READ],
        env={**os.environ, "NPU_TEST_DEVICE": "1", "NPU_TEST_DEVICE_NAME": "npu"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -11, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert "through a host view 7.0\nthrough a copy 7.0\n" in proc.stdout
    assert "read on the host" not in proc.stdout
    assert "the host read or wrote device memory at 0x" in proc.stderr
    assert "(a block of 16 bytes on npu:0)" in proc.stderr


def test_the_test_device_takes_the_device_type_a_plugin_names() -> None:
    """``NPU_TEST_DEVICE_NAME=my_dev``: the device a plugin generated for ``my_dev`` runs on -
    tensors, ``torch.my_dev``, ``torch.accelerator``, its ``my_devccl`` backend and the
    device's own messages all under that name."""
    device = run_with_test_device(
        """
        import json, torch, torch.distributed as dist, npu_test_device as d
        x = torch.ones(3, device="my_dev") * 2
        try:
            torch.empty(1 << 40, dtype=torch.uint8, device="my_dev")
            oom = None
        except torch.OutOfMemoryError as error:
            oom = str(error)
        print(json.dumps({
            "device": str(x.device), "sum": x.sum().item(), "names": [d.NAME, d.DIST_BACKEND],
            "accelerator": torch.accelerator.current_accelerator().type,
            "module": torch.my_dev.get_device_name(0), "backend": dist.is_backend_available(
                "my_devccl"), "npu": hasattr(torch, "npu"), "oom": oom}))
        """,
        NPU_TEST_DEVICE_NAME="my_dev",
    )
    assert (device["device"], device["sum"], device["accelerator"]) == ("my_dev:0", 6.0, "my_dev")
    assert device["names"] == ["my_dev", "my_devccl"] and device["backend"] is True
    assert device["module"] == "my_dev test device 0 (host memory)"
    assert device["npu"] is False
    assert device["oom"] is not None and device["oom"].startswith("my_dev:0 is out of memory")


def test_npuccl_collectives_between_two_processes(tmp_path) -> None:
    result = _run(
        f"""
        import json, torch, torch.distributed as dist, torch.multiprocessing as mp

        def rank_main(rank):
            torch.accelerator.set_device_index(rank)
            dist.init_process_group(
                "npuccl", init_method="file://{tmp_path}/store", rank=rank, world_size=2)
            t = torch.full((4,), float(rank + 1), device="npu")
            dist.all_reduce(t)
            gathered = torch.empty(8, device="npu")
            dist.all_gather_into_tensor(gathered, t)
            scattered = torch.empty(2, device="npu")
            dist.reduce_scatter_tensor(scattered, torch.arange(4.0, device="npu"))
            b = torch.full((2,), float(rank), device="npu")
            dist.broadcast(b, 1)
            p2p = torch.full((3,), float(rank), device="npu")
            if rank == 0:
                dist.send(torch.full((3,), 9.0, device="npu"), 1)
            else:
                dist.recv(p2p, 0)
            out = {{"device": str(t.device), "backend": dist.get_backend(),
                    "all_reduce": t.cpu().tolist(), "all_gather": gathered.cpu().tolist(),
                    "reduce_scatter": scattered.cpu().tolist(), "broadcast": b.cpu().tolist(),
                    "recv": p2p.cpu().tolist()}}
            with open("{tmp_path}/rank%d.json" % rank, "w") as f:
                json.dump(out, f)
            dist.destroy_process_group()

        if __name__ == "__main__":
            mp.spawn(rank_main, nprocs=2)
            print(json.dumps([json.load(open("{tmp_path}/rank%d.json" % r)) for r in (0, 1)]))
        """
    )
    for rank, out in enumerate(result):
        assert (out["device"], out["backend"]) == (f"npu:{rank}", "npuccl")
        assert out["all_reduce"] == [3.0] * 4
        assert out["all_gather"] == [3.0] * 8
        assert out["reduce_scatter"] == [2.0 * (2 * rank), 2.0 * (2 * rank + 1)]
        assert out["broadcast"] == [1.0, 1.0]
    assert result[1]["recv"] == [9.0] * 3


def test_a_build_killed_midway_does_not_block_the_next(tmp_path) -> None:
    """torch's cpp_extension waits forever on the baton file of a build that was killed
    (what hung CI for 90 minutes); the next build removes it and finishes."""
    import shutil

    import npu_test_device

    built = npu_test_device.build_dir()
    if not npu_test_device.library_path().exists():
        pytest.skip("the test device is not built in this environment")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "NPU_TEST_DEVICE": "0"}
    # The same source and torch version's build directory, its objects kept (ninja then
    # only links), its library gone and the baton of a killed build left in it.
    target = tmp_path / "npu_test_device" / built.name
    shutil.copytree(built, target, ignore=shutil.ignore_patterns("*.flock"))
    (target / f"{npu_test_device.LIBRARY}.so").unlink()
    (target / npu_test_device.TORCH_BATON).touch()
    result = subprocess.run(
        [sys.executable, "-m", "npu_test_device", "build"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "left by a build that was killed" in result.stderr
    assert (target / f"{npu_test_device.LIBRARY}.so").exists()
    assert not (target / npu_test_device.TORCH_BATON).exists()

"""The serving and shutdown tests' own checks fail on the faults they guard: a server that
died with its engine still running, a gauge a vLLM release renamed, a /dev/shm entry left
by a run."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from multiprocessing import shared_memory

import psutil
import pytest
from serving import Server, gauges, stop_server
from shutdown_checks import leaked_shm, shm_entries

# A server that dies at once and leaves a child running, as a vllm serve killed outright
# leaves its EngineCore (vllm-project/vllm#55510)
DIES_LEAVING_A_CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(child.pid, flush=True)
"""


def test_stopping_a_server_that_already_died_kills_the_engine_it_left(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", DIES_LEAVING_A_CHILD], text=True,
                            stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
    orphan = int(proc.stdout.readline())
    proc.wait(timeout=30)
    name = psutil.Process(orphan).name()  # running, its parent gone
    killed = stop_server(Server(proc, "http://127.0.0.1:1", tmp_path / "log"), grace_s=1)
    assert killed == [f"{name}:{orphan}"]
    deadline = time.time() + 10
    while psutil.pid_exists(orphan) and psutil.Process(orphan).status() != "zombie":
        assert time.time() < deadline, "the orphan outlived stop_server"
        time.sleep(0.1)


def test_a_gauge_missing_from_metrics_is_an_error_not_a_zero() -> None:
    page = "\n".join([
        "# HELP vllm:num_requests_running Number of requests running.",
        'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0',
        'vllm:num_requests_running{engine="1",model_name="tiny"} 2.0',
        'vllm:num_requests_waiting{engine="0",model_name="tiny"} 1.0',
        'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25',
    ])  # fmt: skip
    assert gauges(page) == {"vllm:num_requests_running": 2.0, "vllm:num_requests_waiting": 1.0,
                            "vllm:kv_cache_usage_perc": 0.25}  # fmt: skip
    renamed = page.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    with pytest.raises(AssertionError, match="no vllm:kv_cache_usage_perc"):
        gauges(renamed)


# A segment that another live process maps (an engine's beside the loop)
MAPS_A_SEGMENT = """
import sys, time
from multiprocessing import resource_tracker, shared_memory
held = shared_memory.SharedMemory(sys.argv[1])
resource_tracker.unregister(held._name, "shared_memory")  # the test unlinks it
print("mapped", flush=True)
time.sleep(60)
"""


def test_an_unused_shm_entry_left_by_a_run_is_a_leak_and_a_mapped_one_is_not() -> None:
    before = shm_entries()
    left = shared_memory.SharedMemory(f"tpl-left-{uuid.uuid4().hex[:8]}", create=True, size=64)
    used = shared_memory.SharedMemory(f"tpl-used-{uuid.uuid4().hex[:8]}", create=True, size=64)
    holder = subprocess.Popen([sys.executable, "-c", MAPS_A_SEGMENT, used.name], text=True,
                              stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "mapped\n"
        left.close()  # this process lets go of both: nothing maps "left" any more
        used.close()
        found = leaked_shm(before, grace=0.5)
        assert left.name in found and used.name not in found, found
    finally:
        holder.kill()
        holder.wait()
        left.unlink()
        used.unlink()

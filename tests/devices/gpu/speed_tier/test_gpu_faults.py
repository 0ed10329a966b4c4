"""Faults on two devices (GPU tier, ``-m gpu``, the ``multi`` stage): ``vllm-template serve``.

- TP=2, a worker process killed (SIGKILL) while 32 streaming requests are in
  flight: every request ends with an error (none hangs, none completes as if
  nothing happened), the server says why in its log, exits within 30 s, leaves
  no process and gives the devices' memory back.
- A client disconnecting mid-stream frees its KV blocks: 64 long streams are
  dropped mid-way, vLLM's ``kv_cache_usage_perc`` and ``num_requests_running``
  metrics return to 0, and the next 64 requests (the KV cache is sized to hold
  about 64 of them at once) all complete. With TP=2 and with PP=2.

The checks are device-neutral (``FAULT_DEVICE``, default the device folder's) so
that they run on the CPU platform too (``FAULT_DEVICE=cpu``, TP=2 over gloo), as
they were written and first run; run serially: they measure whole-device memory.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from serving import PROMPTS, Server, start_server
from shutdown_checks import Descendants

from vllm_platform_template.devices.gpu.identity import IDENTITY

DEVICE = os.environ.get("FAULT_DEVICE", IDENTITY.device_type)
ON_CPU = DEVICE == "cpu"


def _device_count() -> int:
    if ON_CPU:
        return 2
    return IDENTITY.torch_module_or_none().device_count() if IDENTITY.present() else 0


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(_device_count() < 2, reason=f"needs two {DEVICE} devices"),
]

IN_FLIGHT = 32
EXIT_BOUND_S = 30.0
LONG = {"max_tokens": 256, "temperature": 0.0, "ignore_eos": True, "stream": True}
# 64 requests of 64 prompt + 256 generated tokens, 16-token blocks: 20 blocks each.
# The cache holds about 64 such requests (and the KV bytes of the tiny model are small).
KV_CACHE_BYTES = 64 << 20


def _device_used_bytes() -> int:
    if ON_CPU:
        return 0
    module = IDENTITY.torch_module_or_none()
    used = 0
    for i in range(module.device_count()):
        free, total = module.mem_get_info(i)
        used += total - free
    return used


def _serve(tiny_model_dir: Path, tmp_path: Path, layout: str) -> Server:
    extra = [f"--{layout}", "2", "--kv-cache-memory-bytes", str(KV_CACHE_BYTES)]
    if not ON_CPU:
        extra += ["--gpu-memory-utilization", "0.1"]
    return start_server(tiny_model_dir, DEVICE, tmp_path / "server.log", tuple(extra))


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    values = [float(v) for v in re.findall(rf"^vllm:{name}\{{[^}}]*\}} ([\d.e+-]+)$", text, re.M)]
    assert values, f"no vllm:{name} in /metrics"
    return sum(values)


async def _stream(
    client: httpx.AsyncClient,
    url: str,
    prompt: str,
    stop_after: int | None,
    streaming: asyncio.Queue | None = None,
) -> str:
    """One streaming completion: 'completed', 'dropped' (we left after ``stop_after``
    chunks) or the error that ended it; ``streaming`` is told when its first chunk came."""
    body = {"model": "tiny", "prompt": prompt, **LONG}
    chunks = 0
    try:
        async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
            if response.status_code != 200:
                return f"status {response.status_code}"
            async for line in response.aiter_lines():
                if line == "data: [DONE]":
                    return "completed"
                if line.startswith("data: "):
                    if '"error"' in line:
                        return "error event"
                    chunks += 1
                    if chunks == 1 and streaming is not None:
                        streaming.put_nowait(prompt)
                    if stop_after is not None and chunks >= stop_after:
                        return "dropped"  # leaving the block closes the connection
        return "closed early"
    except httpx.HTTPError as e:
        return f"error: {type(e).__name__}"


@pytest.fixture
def baseline_memory() -> int:
    return _device_used_bytes()


def test_tp2_worker_killed_mid_request_fails_requests_and_exits(
    tiny_model_dir: Path, tmp_path: Path, baseline_memory: int
) -> None:
    server = _serve(tiny_model_dir, tmp_path, "tensor-parallel-size")
    descendants = Descendants(server.proc.pid)
    descendants.poll()
    workers = [
        pid for pid, (_, name) in descendants.seen.items() if "Worker" in name and "TP1" in name
    ] or [pid for pid, (_, name) in descendants.seen.items() if "Worker" in name]
    assert workers, f"no worker process among {descendants.seen}"

    async def scenario() -> tuple[list[str], float]:
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=64)) as c:
            streaming: asyncio.Queue = asyncio.Queue()
            jobs = [
                asyncio.create_task(
                    _stream(c, server.url, PROMPTS[i % len(PROMPTS)], None, streaming)
                )
                for i in range(IN_FLIGHT)
            ]
            # Kill once every request is streaming: a fixed wait let all 32 of the tiny
            # model's 256-token streams complete first on a GPU (2026-11-27).
            for _ in range(IN_FLIGHT):
                await asyncio.wait_for(streaming.get(), timeout=120)
            killed = time.monotonic()
            os.kill(workers[-1], signal.SIGKILL)
            return await asyncio.wait_for(asyncio.gather(*jobs), timeout=120), killed

    outcomes, killed = asyncio.run(scenario())
    try:
        server.proc.wait(timeout=EXIT_BOUND_S + 30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
    took = time.monotonic() - killed
    left = descendants.wait_gone(timeout=10)
    log = server.log.read_text()
    # Requests that finished before the kill may complete; every other one fails.
    failed = [o for o in outcomes if o != "completed"]
    assert failed, f"no request saw the dead worker: {outcomes}"
    assert took <= EXIT_BOUND_S, f"server exited {took:.1f} s after the worker was killed"
    assert not left, f"left running: {left}"
    assert re.search(r"died|dead|EngineDeadError|failed", log), log[-5000:]
    leaked = _device_used_bytes() - baseline_memory
    assert leaked < 256 << 20, f"{leaked >> 20} MiB of device memory still held"


@pytest.mark.parametrize("layout", ["tensor-parallel-size", "pipeline-parallel-size"])
def test_client_disconnect_frees_kv_blocks(
    tiny_model_dir: Path, tmp_path: Path, layout: str
) -> None:
    server = _serve(tiny_model_dir, tmp_path, layout)
    try:

        async def drop_then_load() -> tuple[list[str], list[str]]:
            limits = httpx.Limits(max_connections=128)
            async with httpx.AsyncClient(timeout=300, limits=limits) as c:
                prompts = [PROMPTS[i % len(PROMPTS)] for i in range(64)]
                dropped = await asyncio.gather(*(_stream(c, server.url, p, 8) for p in prompts))
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and (
                    _metric(server.url, "num_requests_running") > 0
                    or _metric(server.url, "kv_cache_usage_perc") > 0
                ):
                    await asyncio.sleep(0.5)
                assert _metric(server.url, "num_requests_running") == 0
                assert _metric(server.url, "kv_cache_usage_perc") == 0
                after = await asyncio.wait_for(
                    asyncio.gather(*(_stream(c, server.url, p, None) for p in prompts)),
                    timeout=600,
                )
                return dropped, after

        dropped, after = asyncio.run(drop_then_load())
        assert set(dropped) == {"dropped"}, dropped
        assert set(after) == {"completed"}, after
    finally:
        server.proc.send_signal(signal.SIGINT)
        try:
            server.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.proc.kill()

"""``vllm-template serve`` started, loaded, stopped and checked: what the serving tests share.

Shared by the CPU backend's serving tests (``tests/full_plugin/test_serving.py``, the OpenAI
client's, the soak) and the GPU folder's speed tier (``test_gpu_serving.py``, its faults and
parallel tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from vllm_platform_template.platform_hooks.entry_point import DEVICE_ENV

PROMPTS = [f"Request number {i}: the capital of France is" for i in range(16)]
MAX_TOKENS = 16
CONCURRENT = 64
LOAD_TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc: subprocess.Popen, url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def completion(self, prompt: str) -> str:
        body = self._body(prompt, stream=False)
        response = httpx.post(f"{self.url}/v1/completions", json=body, timeout=120)
        response.raise_for_status()
        return response.json()["choices"][0]["text"]

    def _body(self, prompt: str, stream: bool) -> dict:
        return {
            "model": "tiny",
            "prompt": prompt,
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": stream,
        }

    async def completion_async(self, client: httpx.AsyncClient, prompt: str, stream: bool) -> str:
        body = self._body(prompt, stream)
        if not stream:
            response = await client.post(f"{self.url}/v1/completions", json=body)
            response.raise_for_status()
            return response.json()["choices"][0]["text"]
        text = []
        async with client.stream("POST", f"{self.url}/v1/completions", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    text.append(json.loads(line[6:])["choices"][0]["text"])
        return "".join(text)


def start_server(
    model_dir: Path,
    device: str,
    log: Path,
    extra_args: tuple[str, ...] = (),
    env_overrides: dict[str, str] | None = None,
) -> Server:
    """``vllm-template serve`` on ``device`` with the tiny model, once /health answers."""
    return wait_healthy(launch_server(model_dir, device, log, extra_args, env_overrides))


def launch_server(
    model_dir: Path,
    device: str,
    log: Path,
    extra_args: tuple[str, ...] = (),
    env_overrides: dict[str, str] | None = None,
) -> Server:
    """``vllm-template serve`` started, not yet waited for (servers may start side by side)."""
    port = _free_port()
    env = {**os.environ, DEVICE_ENV: device, "VLLM_CACHE_ROOT": str(log.parent / "cache")}
    env.update(env_overrides or {})
    cmd = [
        sys.executable, "-m", "vllm_platform_template_tools.cli.main", "serve", str(model_dir),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "tiny",
        "--dtype", "float32", "--max-model-len", "512", "--seed", "0",
        "--kv-cache-memory-bytes", str(256 << 20), "--max-num-seqs", str(CONCURRENT),
        *extra_args,
    ]  # fmt: skip
    with log.open("w") as out:
        # a session of its own: its engine processes stay findable after it exits
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    return Server(proc, f"http://127.0.0.1:{port}", log)


def session_members(leader: int) -> list[psutil.Process]:
    """The processes of the session ``leader`` started, orphans among them: a child whose
    parent died keeps its session."""
    members = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.pid != leader and os.getsid(proc.pid) == leader:
                members.append(proc)
    return members


def stop_server(server: Server, timeout_s: float = 60, grace_s: float = 10) -> list[str]:
    """Stop ``server`` as a user would (SIGTERM; SIGKILL after ``timeout_s``), then kill
    every process of its session still running ``grace_s`` after it ended - also where it
    had ended before: a ``vllm serve`` killed outright, or one that died, leaves its
    EngineCore and worker running as orphans (vllm-project/vllm#55510). Returns the
    processes it had to kill (``name:pid``)."""
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()
    _, alive = psutil.wait_procs(session_members(server.proc.pid), timeout=grace_s)
    killed = []
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            killed.append(f"{proc.name()}:{proc.pid}")
            proc.kill()
    return killed


IDLE_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting",
               "vllm:kv_cache_usage_perc")  # fmt: skip


def gauges(metrics_text: str, wanted: tuple[str, ...] = IDLE_GAUGES) -> dict[str, float]:
    """Each of ``wanted`` in a Prometheus ``/metrics`` page, summed over its labels; a
    gauge the page lacks (renamed by a vLLM release) is an error, never a zero."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in wanted:
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    missing = [name for name in wanted if name not in out]
    if missing:
        raise AssertionError(f"/metrics has no {', '.join(missing)}: renamed in this vLLM?")
    return out


def wait_healthy(server: Server, timeout_s: float = 600) -> Server:
    """``server`` once its /health answers; the test fails with its log if it exits first."""
    proc, url, log = server.proc, server.url, server.log
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-5000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(2)
    proc.kill()
    pytest.fail(f"vllm serve did not become healthy in {timeout_s:.0f} s")


def check_concurrent_load(server: Server) -> None:
    """64 requests at once, half streaming: each equals the same prompt sent alone."""
    sequential = {p: server.completion(p) for p in PROMPTS}

    async def load() -> list[tuple[str, str]]:
        limits = httpx.Limits(max_connections=CONCURRENT)
        async with httpx.AsyncClient(timeout=LOAD_TIMEOUT_S, limits=limits) as client:
            jobs = [(PROMPTS[i % len(PROMPTS)], i % 2 == 0) for i in range(CONCURRENT)]
            texts = await asyncio.wait_for(
                asyncio.gather(*(server.completion_async(client, p, s) for p, s in jobs)),
                timeout=LOAD_TIMEOUT_S,
            )
            return [(p, t) for (p, _), t in zip(jobs, texts, strict=True)]

    results = asyncio.run(load())
    assert len(results) == CONCURRENT
    for prompt, text in results:
        assert text == sequential[prompt], f"concurrent output differs for {prompt!r}"
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    assert server.completion(PROMPTS[1]) == sequential[PROMPTS[1]]


# vLLM 0.32's AsyncLLM.shutdown tears the engine core down before it cancels
# its output_handler task; when the loop runs the handler first it logs the
# client's own EngineDeadError poison pill with a traceback. Stock vLLM, any
# platform: https://github.com/vllm-project/vllm/issues/48745 (fix in PR
# #49000). Remove this allowance when the supported vLLM includes that fix.
_UPSTREAM_SHUTDOWN_RACE = re.compile(
    r"^.*\[async_llm\.py:\d+\] AsyncLLM output_handler failed\.\n"
    r"(?:^.*\[async_llm\.py:\d+\] .*\n)*?"
    r"^.*\[async_llm\.py:\d+\] vllm\.v1\.engine\.exceptions\.EngineDeadError: .*\n",
    re.MULTILINE,
)


def strip_upstream_shutdown_race(log: str) -> str:
    """Drop the known upstream output_handler race, only when it follows shutdown."""
    start = log.find("[shutdown]")
    if start < 0:
        return log
    return log[:start] + _UPSTREAM_SHUTDOWN_RACE.sub("", log[start:])


def check_clean_shutdown(server: Server) -> None:
    """SIGINT stops the server within 120 s and its log holds no traceback of ours."""
    server.proc.send_signal(signal.SIGINT)
    try:
        server.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        pytest.fail("vllm serve did not stop within 120 s of SIGINT")
    log = strip_upstream_shutdown_race(server.log.read_text())
    assert "Traceback" not in log, log[-5000:]


IN_FLIGHT = 16
SIGNAL_EXIT_BOUND_S = 10.0


def check_stops_with_streams_in_flight(server: Server, signum: int) -> None:
    """``signum`` while 16 streaming completions are mid-stream: every stream ends (its
    last chunk or an error, none hangs), the server exits within 10 s, nothing is left."""
    from shutdown_checks import Descendants, force_kill_lines, leak_lines

    descendants = Descendants(server.proc.pid)
    descendants.poll()
    assert descendants.seen, "vllm serve runs its engine in child processes"
    body = {
        "model": "tiny", "prompt": PROMPTS[0], "max_tokens": 400, "temperature": 0.0,
        "ignore_eos": True, "stream": True,
    }  # fmt: skip
    started = asyncio.Event()
    streaming: set[int] = set()
    signalled: list[float] = []

    async def stream(client: httpx.AsyncClient, i: int) -> str:
        try:
            async with client.stream("POST", f"{server.url}/v1/completions", json=body) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        streaming.add(i)
                        if len(streaming) == IN_FLIGHT:
                            started.set()
                    if line == "data: [DONE]":
                        return "completed"
            return f"closed (status {r.status_code})"
        except httpx.HTTPError as e:
            return f"error: {type(e).__name__}"

    async def scenario() -> list[str]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as c:
            jobs = [asyncio.create_task(stream(c, i)) for i in range(IN_FLIGHT)]
            await asyncio.wait_for(started.wait(), timeout=120)
            signalled.append(time.monotonic())
            server.proc.send_signal(signum)
            return await asyncio.wait_for(asyncio.gather(*jobs), timeout=60)

    outcomes = asyncio.run(scenario())
    try:
        server.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        pytest.fail(f"vllm serve did not stop within 60 s of {signal.Signals(signum).name}")
    took = time.monotonic() - signalled[0]
    left = descendants.wait_gone(timeout=10)
    log = server.log.read_text()
    assert len(outcomes) == IN_FLIGHT and all(o for o in outcomes), outcomes
    assert took <= SIGNAL_EXIT_BOUND_S, f"exited {took:.1f} s after the signal"
    assert not left, f"left running: {left}"
    # No process was killed with its semaphores or shared memory still registered. (vLLM
    # 0.32 may log "force killing" for an EngineCore that has exited: its liveness monitor
    # reads proc.exitcode, a waitpid, while the shutdown joins the same process, and the
    # loser of that race sees it alive; the EngineCore's log shows its whole teardown.)
    assert leak_lines(log) == [], log[-5000:]
    print(f"{signal.Signals(signum).name} with {IN_FLIGHT} streams: exit in {took:.1f} s, "
          f"status {server.proc.returncode}, streams {sorted(set(outcomes))}, "
          f"force-kill lines {len(force_kill_lines(log))}")  # fmt: skip

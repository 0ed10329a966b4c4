"""``vllm-template serve`` under a long streaming load: no errors, no drift, nothing left held.

``SOAK_CLIENTS`` (32) clients stream completions at once for ``SOAK_MINUTES`` (2 in the
e2e tier; ``tox -e soak``: 30). Each request picks one of 16 prompts (greedy, fp32, 8 to
32 tokens); a seeded share of them is cancelled mid-stream (the client closes the
stream), a share drops the whole connection and reconnects, a few are not streamed.
Checked:

- zero 5xx and zero failed connections; every completed request's text equals the
  answer its prompt got alone before the load (the reference);
- the resident memory of every process of the server (API server, EngineCore, worker),
  sampled every 5 s, stays flat after the warm-up (the first quarter, at least 60 s: the
  worker's grows by a third in its first minute of mixed batches, 1.1 to 1.5 GiB, and
  by 1 % in the next three): the last quarter's highest sample at most ``RSS_GROWTH``
  (5 %) over the warm-up's end;
- once the clients stop, vLLM's own metrics show no request running or waiting and
  every KV-cache block free (``vllm:kv_cache_usage_perc`` 0);
- p50/p99 latency of completed streams per minute, printed; with ``SOAK_REPORT=DIR`` the
  figures go to ``DIR/soak.json`` and a chart to ``DIR/soak.png``.

``SOAK_DEVICE=cuda`` serves on the GPU platform (the GPU tier's serve stage: 256 clients,
5 minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from serving import Server, gauges, start_server, stop_server

pytestmark = pytest.mark.e2e

DEVICE = os.environ.get("SOAK_DEVICE", "cpu")  # the GPU tier's serve stage: cuda
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "32"))
MINUTES = float(os.environ.get("SOAK_MINUTES", "2"))
REPORT = os.environ.get("SOAK_REPORT")
RSS_GROWTH = 0.05
SAMPLE_EVERY_S = 5.0
PROMPTS = [(f"Chapter {i}: It is a truth universally acknowledged that", 8 + 8 * (i % 4))
           for i in range(16)]  # fmt: skip
CANCEL, DISCONNECT, UNSTREAMED = 0.15, 0.08, 0.07  # shares of the requests


def _body(prompt: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    return {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": True, "stream": stream}  # fmt: skip


async def _request(client: httpx.AsyncClient, url: str, i: int, stream: bool, stop_after: int):
    """(status, text) of one request; ``stop_after`` > 0: close the stream after that many
    chunks (text None)."""
    prompt, max_tokens = PROMPTS[i]
    body = _body(prompt, max_tokens, stream)
    if not stream:
        response = await client.post(f"{url}/v1/completions", json=body)
        text = response.json()["choices"][0]["text"] if response.status_code == 200 else None
        return response.status_code, text
    chunks: list[str] = []
    async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, None
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:])["choices"][0]["text"])
                if stop_after and len(chunks) >= stop_after:
                    return 200, None  # leaving the block closes the stream mid-way
    return 200, "".join(chunks)


class Load:
    """The clients, their records, and the server's memory over time."""

    def __init__(self, server: Server, reference: dict[int, str], seconds: float) -> None:
        self.server, self.reference, self.seconds = server, reference, seconds
        self.records: list[dict[str, Any]] = []
        self.rss: list[dict[str, Any]] = []
        self.begin = 0.0

    async def client(self, seed: int) -> None:
        rng = random.Random(seed)
        limits = httpx.Limits(max_connections=1)
        client = httpx.AsyncClient(timeout=120, limits=limits)
        try:
            while time.monotonic() - self.begin < self.seconds:
                i = rng.randrange(len(PROMPTS))
                roll = rng.random()
                kind = ("cancel" if roll < CANCEL else "disconnect" if roll < CANCEL + DISCONNECT
                        else "unstreamed" if roll < CANCEL + DISCONNECT + UNSTREAMED
                        else "stream")  # fmt: skip
                stop_after = rng.randint(1, 4) if kind in ("cancel", "disconnect") else 0
                start = time.monotonic()
                try:
                    status, text = await _request(
                        client, self.server.url, i, kind != "unstreamed", stop_after
                    )
                except httpx.HTTPError as exc:
                    status, text = 0, f"{type(exc).__name__}: {exc}"
                end = time.monotonic()
                self.records.append({"t": start - self.begin, "seconds": end - start,
                                     "kind": kind, "prompt": i, "status": status,
                                     "equal": None if status != 200 or stop_after
                                     else text == self.reference[i]})  # fmt: skip
                if kind == "disconnect":  # the whole connection goes; a new one comes
                    await client.aclose()
                    client = httpx.AsyncClient(timeout=120, limits=limits)
        finally:
            await client.aclose()

    async def sample_memory(self) -> None:
        root = psutil.Process(self.server.proc.pid)
        while time.monotonic() - self.begin < self.seconds:
            sample: dict[str, Any] = {"t": time.monotonic() - self.begin}
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    sample[f"{proc.name()}:{proc.pid}"] = proc.memory_info().rss
            self.rss.append(sample)
            await asyncio.sleep(SAMPLE_EVERY_S)

    async def run(self) -> None:
        self.begin = time.monotonic()
        await asyncio.gather(self.sample_memory(), *(self.client(seed) for seed in range(CLIENTS)))


def _metrics(url: str) -> dict[str, float]:
    """vLLM's gauges of running/waiting requests and KV-cache usage (summed over labels)."""
    return gauges(httpx.get(f"{url}/metrics", timeout=10).text)


def per_minute(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """p50/p99 seconds of the completed streams that started in each minute."""
    rows = []
    for minute in range(int(max((r["t"] for r in records), default=0) // 60) + 1):
        done = sorted(r["seconds"] for r in records
                      if r["kind"] == "stream" and r["status"] == 200 and r["equal"] is not None
                      and minute * 60 <= r["t"] < (minute + 1) * 60)  # fmt: skip
        if done:
            rows.append({"minute": minute + 1, "requests": len(done),
                         "p50_s": statistics.median(done),
                         "p99_s": done[min(len(done) - 1, int(0.99 * len(done)))]})  # fmt: skip
    return rows


def rss_growth(samples: list[dict[str, Any]], seconds: float) -> dict[str, float]:
    """Per process: the last quarter's highest RSS over the RSS at the warm-up's end."""
    warm = max(60.0, seconds / 4)
    growth = {}
    names = {k for s in samples for k in s if k != "t"}
    for name in names:
        series = [(s["t"], s[name]) for s in samples if name in s]
        after = [v for t, v in series if t >= warm]
        if len(after) < 2:
            continue
        last = [v for t, v in series if t >= seconds * 0.75] or after[-1:]
        growth[name] = max(last) / after[0] - 1
    return growth


@pytest.fixture(scope="module")
def soak(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    log = tmp_path_factory.mktemp("soak") / "server.log"
    server = start_server(tiny_model_dir, DEVICE, log)
    try:
        with httpx.Client(timeout=120) as client:
            reference = {}
            for i, (prompt, max_tokens) in enumerate(PROMPTS):
                answer = client.post(f"{server.url}/v1/completions",
                                     json=_body(prompt, max_tokens, False))  # fmt: skip
                answer.raise_for_status()
                reference[i] = answer.json()["choices"][0]["text"]
        load = Load(server, reference, MINUTES * 60)
        asyncio.run(load.run())
        time.sleep(3)  # the last cancelled requests' aborts reach the engine
        after = _metrics(server.url)
        healthy = httpx.get(f"{server.url}/health", timeout=10).status_code
    finally:
        left_running = stop_server(server)
    result = {"clients": CLIENTS, "minutes": MINUTES, "records": load.records,
              "left_running": left_running,
              "rss": load.rss, "metrics_after": after, "health_after": healthy,
              "per_minute": per_minute(load.records),
              "rss_growth": rss_growth(load.rss, MINUTES * 60)}  # fmt: skip
    if REPORT:
        _report(result, Path(REPORT))
    return result


def requests_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """How many requests of each kind, status and outcome (the report keeps no request)."""
    out: dict[str, Any] = {"total": len(records)}
    for key in ("kind", "status", "equal"):
        out[key] = {str(v): sum(r[key] == v for r in records) for v in {r[key] for r in records}}
    return out


def _report(result: dict[str, Any], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in result.items() if k != "records"}
    kept["requests"] = requests_summary(result["records"])
    (folder / "soak.json").write_text(json.dumps(kept, indent=1))
    import matplotlib  # tox -e soak installs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lat, mem) = plt.subplots(1, 2, figsize=(12, 4.2))
    rows = result["per_minute"]
    minutes = [r["minute"] for r in rows]
    lat.plot(minutes, [r["p50_s"] for r in rows], "o-", label="p50")
    lat.plot(minutes, [r["p99_s"] for r in rows], "s-", label="p99")
    lat.set_xlabel("minute")
    lat.set_ylabel("seconds per completed stream")
    lat.legend()
    names = sorted({k for s in result["rss"] for k in s if k != "t"})
    for name in names:
        series = [(s["t"] / 60, s[name] / 2**20) for s in result["rss"] if name in s]
        mem.plot(*zip(*series, strict=True), label=name.rsplit(":", 1)[0])
    mem.set_xlabel("minute")
    mem.set_ylabel("resident MiB")
    mem.legend(fontsize=7)
    fig.suptitle(f"vllm-template serve, tiny model on {DEVICE}: {result['clients']} streaming "
                 f"clients for {result['minutes']:g} min")  # fmt: skip
    fig.tight_layout()
    fig.savefig(folder / "soak.png", dpi=100)


def test_no_errors_and_every_completed_answer_equals_its_reference(soak) -> None:
    records = soak["records"]
    kinds = {k: sum(r["kind"] == k for r in records) for k in
             ("stream", "cancel", "disconnect", "unstreamed")}  # fmt: skip
    print(f"soak: {len(records)} requests {kinds} from {soak['clients']} clients in "
          f"{soak['minutes']:g} min")  # fmt: skip
    assert all(kinds.values()), kinds  # every behaviour happened
    failed = [r for r in records if r["status"] != 200]
    assert not failed, failed[:10]
    unequal = [r for r in records if r["equal"] is False]
    assert not unequal, f"{len(unequal)} completed answers differ from the reference"
    assert soak["health_after"] == 200


def test_latency_per_minute_is_reported(soak) -> None:
    rows = soak["per_minute"]
    for row in rows:
        print(f"minute {row['minute']}: {row['requests']} streams, p50 {row['p50_s']:.3f} s, "
              f"p99 {row['p99_s']:.3f} s")  # fmt: skip
    assert len(rows) >= int(soak["minutes"])


def test_memory_is_flat_after_the_warm_up(soak) -> None:
    growth = soak["rss_growth"]
    print(
        "rss growth after warm-up: " + ", ".join(f"{k} {100 * v:+.1f} %" for k, v in growth.items())
    )
    assert len(growth) >= 3, growth  # the API server, the EngineCore and the worker
    grown = {k: v for k, v in growth.items() if v > RSS_GROWTH}
    assert not grown, grown


def test_nothing_is_left_running_or_allocated(soak) -> None:
    assert soak["left_running"] == [], "processes of the server's still running after it ended"
    after = soak["metrics_after"]
    assert after["vllm:num_requests_running"] == 0, after
    assert after["vllm:num_requests_waiting"] == 0, after
    assert after["vllm:kv_cache_usage_perc"] == 0, after

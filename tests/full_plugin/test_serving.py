"""``vllm-template serve`` (vLLM's ``serve``) on the template CPU platform.

OpenAI completions API, concurrent load, SIGINT with 16 streams in flight (every
stream ends, the server exits within 10 s, no process left, no traceback);
``test_openai_client.py`` sends SIGTERM the same way; ``test_gpu_serving.py``
and ``test_gpu_parallel.py`` reuse the checks on the GPU platform.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import (
    PROMPTS,
    Server,
    check_concurrent_load,
    check_stops_with_streams_in_flight,
    start_server,
    stop_server,
    strip_upstream_shutdown_race,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("serve") / "server.log"
    running = start_server(tiny_model_dir, "cpu", log)
    yield running
    stop_server(running)


def test_completion_on_the_template_platform(server: Server) -> None:
    text = server.completion(PROMPTS[0])
    assert len(text) > 0
    assert "TemplateCpuPlatform" in server.log.read_text() or "template" in server.log.read_text()


def test_concurrent_load_equals_sequential_results(server: Server) -> None:
    check_concurrent_load(server)


def test_upstream_race_filter_keeps_other_tracebacks() -> None:
    race = (
        "(APIServer pid=1) INFO [utils.py:628] [shutdown] Process manager: send sigterm\n"
        "(APIServer pid=1) ERROR 11-22 [async_llm.py:906] AsyncLLM output_handler failed.\n"
        "(APIServer pid=1) ERROR 11-22 [async_llm.py:906] Traceback (most recent call last):\n"
        '(APIServer pid=1) ERROR 11-22 [async_llm.py:906]   File "x.py", line 1, in f\n'
        "(APIServer pid=1) ERROR 11-22 [async_llm.py:906] "
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n"
    )
    assert "Traceback" not in strip_upstream_shutdown_race(race)
    other = race + "Traceback (most recent call last):\n  RuntimeError: boom\n"
    assert "Traceback" in strip_upstream_shutdown_race(other)
    before_shutdown = race.replace("[shutdown]", "[startup]")
    assert "Traceback" in strip_upstream_shutdown_race(before_shutdown)


def test_sigint_with_streams_in_flight_stops_at_once_without_tracebacks(server: Server) -> None:
    check_stops_with_streams_in_flight(server, signal.SIGINT)
    log = strip_upstream_shutdown_race(server.log.read_text())
    assert "Traceback" not in log, log[-5000:]

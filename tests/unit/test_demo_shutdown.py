"""How the demo stops its engine (``cli/demo.py``, ``shutdown_engine``)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

from vllm.v1.engine.core_client import MPClient
from vllm.v1.engine.utils import CoreEngineProcManager

from vllm_platform_template_tools.cli import demo


def test_the_engine_gets_more_than_vllms_best_effort_window_to_stop() -> None:
    """vLLM force-kills an engine still running 5 s after SIGTERM unless given a timeout.

    A loaded CI host once needed longer: the killed engine left two shared-memory
    queues and a semaphore, and the resource tracker's warnings broke ``demo --quiet``'s
    empty stderr. The demo hands its own window to the client, which vLLM passes on
    to the process manager that terminates, waits and then kills.
    """
    seen: list[float | None] = []
    client = SimpleNamespace(shutdown=lambda timeout=None: seen.append(timeout))
    demo.shutdown_engine(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=client)))
    assert seen == [demo.ENGINE_STOP_TIMEOUT_S]
    assert demo.ENGINE_STOP_TIMEOUT_S > 5.0
    for stops in (MPClient.shutdown, CoreEngineProcManager.shutdown):
        assert "timeout" in inspect.signature(stops).parameters, stops.__qualname__

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
    client = SimpleNamespace(shutdown=lambda timeout=None: seen.append(timeout), resources=None)
    demo.shutdown_engine(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=client)))
    assert seen == [demo.ENGINE_STOP_TIMEOUT_S]
    assert demo.ENGINE_STOP_TIMEOUT_S > 5.0
    for stops in (MPClient.shutdown, CoreEngineProcManager.shutdown):
        assert "timeout" in inspect.signature(stops).parameters, stops.__qualname__


def test_a_killed_engine_is_reported_with_its_cause(monkeypatch) -> None:
    """An engine vLLM had to SIGKILL leaves the resource tracker's leak warnings on stderr:
    the demo says why first, at error level (``--quiet`` shows it); a clean exit says
    nothing."""
    import signal

    errors: list[str] = []
    logger = SimpleNamespace(error=lambda msg, *args: errors.append(msg % args))
    monkeypatch.setattr("vllm_platform_template.log.get_logger", lambda name: logger)
    for exitcode, expected in ((0, 0), (-signal.SIGKILL, 1)):
        proc = SimpleNamespace(name="EngineCore", pid=123, exitcode=exitcode)
        manager = SimpleNamespace(processes=[proc])
        client = SimpleNamespace(
            shutdown=lambda timeout=None: None,
            resources=SimpleNamespace(engine_manager=manager),
        )
        demo.shutdown_engine(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=client)))
        assert len(errors) == expected
    assert "EngineCore (pid 123)" in errors[0] and "did not stop within 60 s" in errors[0]

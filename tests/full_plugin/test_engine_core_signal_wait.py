"""The EngineCore's idle wait runs its SIGTERM handler (the patch's code: ``shutdown.py``).

The hang the shutdown stress loop caught, reproduced without vLLM: a process whose main
thread waits on a ``queue.Queue`` without a timeout and whose Python SIGTERM handler is
what would wake it (vLLM's ``run_engine_core``: the handler marks the shutdown and a
callback thread puts a WAKEUP request into the queue). The signal is taken by another
thread (``signal.pthread_kill``): the C-level handler runs there, the Python handler
waits for the main thread to run bytecode, and the main thread never wakes. With the
patch's ``sliced_get`` it wakes within one slice and the handler runs. Then the patch on
vLLM's own classes: their real busy loop, run idle, waits through the sliced get.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from vllm_platform_template import shutdown

REPO_ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import queue, signal, sys, threading, time
    from vllm_platform_template.shutdown import sliced_get

    requests = queue.Queue()
    woken = threading.Event()

    def wake():  # vLLM's SignalCallback: a thread puts the wakeup request
        woken.wait()
        requests.put_nowait("WAKEUP")

    def handler(signum, frame):  # vLLM's signal_handler: runs in the main thread only
        print("handler ran", flush=True)
        woken.set()

    signal.signal(signal.SIGTERM, handler)
    threading.Thread(target=wake, daemon=True).start()

    def take_the_signal():  # another thread takes SIGTERM while the main thread waits
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=take_the_signal, daemon=True).start()
    get = requests.get if sys.argv[1] == "plain" else lambda: sliced_get(requests)
    print("got", get(), flush=True)
    """
)


def _run_child(mode: str, timeout: float) -> subprocess.CompletedProcess | None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_plain_wait_never_runs_the_handler_of_a_signal_another_thread_took() -> None:
    """The bug itself: without the patch the main thread sleeps on (killed after 5 s)."""
    assert _run_child("plain", timeout=5) is None


def test_the_sliced_wait_runs_the_handler_and_takes_the_wakeup() -> None:
    begin = time.monotonic()
    done = _run_child("sliced", timeout=20)
    assert done is not None, "the sliced wait did not wake either"
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["handler ran", "got WAKEUP"]
    assert time.monotonic() - begin < 10


def test_sliced_get_keeps_queue_semantics() -> None:
    import queue

    requests: queue.Queue = queue.Queue()
    with pytest.raises(queue.Empty):
        shutdown.sliced_get(requests, block=False)
    begin = time.monotonic()
    with pytest.raises(queue.Empty):
        shutdown.sliced_get(requests, timeout=0.5)
    assert 0.45 <= time.monotonic() - begin < 2
    requests.put(1)
    assert shutdown.sliced_get(requests) == 1
    requests.put(2)
    assert shutdown.sliced_get(requests, timeout=0) == 2


def test_the_patch_slices_the_queue_of_the_engine_being_built() -> None:
    """vLLM loads the plugins - and so applies the patch - inside EngineCore.__init__:
    the engine being built must get the sliced wait (wrapping __init__ missed it)."""
    import queue

    module = types.ModuleType("fake_core")

    class EngineCoreProc:  # as vLLM's: the queue built, the plugins loaded, then the loop
        def __init__(self) -> None:
            self.input_queue: queue.Queue = queue.Queue()
            shutdown._sliced_input_queue_waits(module)  # load_general_plugins()
            shutdown._sliced_input_queue_waits(module)  # idempotent

        def run_busy_loop(self) -> object:
            return self.input_queue.get

    module.EngineCoreProc = EngineCoreProc  # type: ignore[attr-defined]
    engine = EngineCoreProc()
    get = engine.run_busy_loop()
    assert get.func is shutdown.sliced_get  # type: ignore[attr-defined]
    assert type(engine.input_queue) is queue.Queue
    assert queue.Queue().get.__func__ is queue.Queue.get  # other queues untouched


# vLLM's own EngineCoreProc, patched as the plugin patches it, its real busy loop and input
# loop run idle on an instance built without an engine: a request arrives after 0.3 s
REAL_LOOP = textwrap.dedent(
    """
    import json, queue, threading
    import vllm.v1.engine.core as core
    from vllm_platform_template import shutdown

    shutdown._sliced_input_queue_waits(core)
    calls = []
    plain = shutdown.sliced_get
    shutdown.sliced_get = lambda *a, **k: calls.append(k) or plain(*a, **k)
    engine = object.__new__(core.EngineCoreProc)
    engine.input_queue, engine.aborts_queue = queue.Queue(), queue.Queue()
    engine.process_input_queue_block = True
    handled = []
    engine._handle_shutdown = lambda: not handled
    engine.has_work = lambda: bool(handled)
    engine.is_running = lambda: True
    engine._notify_idle_state_callbacks = lambda: None
    engine._handle_client_request = lambda *request: handled.append(request)
    engine._maybe_publish_request_counts = lambda: None
    engine._process_engine_step = lambda: None
    threading.Timer(0.3, engine.input_queue.put, [("ADD", "request")]).start()
    try:
        core.EngineCoreProc.run_busy_loop(engine)
    except SystemExit:
        pass
    patched = [getattr(vars(c).get("run_busy_loop"), "__template_patched__", False)
               for c in (core.EngineCoreProc, core.DPEngineCoreProc)]
    print(json.dumps({"sliced_gets": len(calls), "handled": handled, "patched": patched}))
    """
)


def test_vllms_own_busy_loop_waits_through_the_sliced_get() -> None:
    """The patch reaches vLLM's real classes (``EngineCoreProc`` and ``DPEngineCoreProc``
    define ``run_busy_loop`` themselves), and vLLM's real loop still takes its requests
    through ``input_queue.get``: with either changed upstream, no sliced wait is counted."""
    proc = subprocess.run([sys.executable, "-c", REAL_LOOP], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["patched"] == [True, True]
    assert found["handled"] == [["ADD", "request"]]
    assert found["sliced_gets"] >= 1


def test_vllms_engine_core_loads_the_plugins_while_it_is_built() -> None:
    """The ordering the patch rests on (vLLM 0.32: EngineCore.__init__ calls
    load_general_plugins; EngineCoreProc.run_busy_loop runs after construction)."""
    import inspect

    from vllm.v1.engine.core import EngineCore, EngineCoreProc

    assert "load_general_plugins()" in inspect.getsource(EngineCore.__init__)
    assert "run_busy_loop" in vars(EngineCoreProc)

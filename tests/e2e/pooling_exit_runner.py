"""An embedding script as a user writes it: build an engine, embed, print, exit - no cleanup.

    python tests/e2e/pooling_exit_runner.py DEVICE [--late-output-thread]
                                        # DEVICE: cpu (template) or stock

The last call embeds ``PROMPTS`` prompts at once, so the engine's last output message
carries that many tensors: vLLM's sync client keeps that message in its output thread
until the thread ends, and a thread freeing tensors while the interpreter finalizes
aborts the process ("terminate called without an active exception"; the patch registry's
``client_threads_end_before_the_interpreter``). Prints one JSON line: the platform and the
number of embeddings; as the interpreter is about to finalize (its first exit handler,
which runs last), one stderr line names the client output threads still alive.
``--late-output-thread`` makes the race certain instead of occasional: the output thread
wakes ``LATE_S`` late from its stop signal, as on a host too busy to schedule it, so it
is still alive at finalization unless the main thread waits for it.
``tests/e2e/test_engine_exit.py`` runs it and reads both.
"""

from __future__ import annotations

import atexit
import json
import sys
import threading

PROMPTS = 64
# vLLM 0.32's SyncMPClient output thread (vllm/v1/engine/core_client.py)
OUTPUT_THREAD = "EngineCoreOutputQueueThread"
EXIT_LINE = "output threads alive as the interpreter finalizes:"
LATE_S = 1.0


def _report_output_threads() -> None:
    alive = sorted(t.name for t in threading.enumerate() if t.name == OUTPUT_THREAD)
    print(f"{EXIT_LINE} {json.dumps(alive)}", file=sys.stderr, flush=True)


def _output_thread_wakes_late() -> None:
    """The output thread sleeps ``LATE_S`` after a poll that returns its stop signal (the
    one PAIR socket it polls; vLLM 0.32 ``SyncMPClient.process_outputs_socket``)."""
    import time

    import zmq

    poll = zmq.Poller.poll

    def late_poll(self: zmq.Poller, *args: object, **kwargs: object) -> list:
        events = poll(self, *args, **kwargs)
        if threading.current_thread().name == OUTPUT_THREAD and any(
            getattr(sock, "socket_type", None) == zmq.PAIR for sock, _ in events
        ):
            time.sleep(LATE_S)
        return events

    zmq.Poller.poll = late_poll  # type: ignore[method-assign]


def main(device: str, late_output_thread: bool) -> None:
    atexit.register(_report_output_threads)  # before vLLM's: runs after them
    if late_output_thread:
        _output_thread_wakes_late()
    from vllm_platform_template_tools.cli.environment import logs_to_stderr, select_device
    from vllm_platform_template_tools.embedded_model import ensure_model

    select_device(None if device == "stock" else device)
    logs_to_stderr()
    model_dir = ensure_model("tiny")
    from vllm import LLM
    from vllm.platforms import current_platform

    llm = LLM(model=str(model_dir), dtype="float32", seed=0, enforce_eager=True,
              max_model_len=128, kv_cache_memory_bytes=64 << 20, runner="pooling")  # fmt: skip
    prompts = [f"Elizabeth walked on, {i} times." for i in range(PROMPTS)]
    outputs = llm.embed(prompts, use_tqdm=False)
    report = {"platform": type(current_platform).__name__, "embeddings": len(outputs)}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], "--late-output-thread" in sys.argv[2:])

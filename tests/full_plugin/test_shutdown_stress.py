"""Engines started and stopped one after another while every core is busy.

Each run is ``vllm-template demo --json`` (an offline engine: front end, EngineCore
and worker processes, vLLM's default shutdown timeouts). Once the engine is up,
other processes keep every core busy (bounded: they stop with the run). Each run
must exit with status 0 within ``EXIT_BOUND_S`` of its shutdown's start (vLLM's
"[shutdown] MPClient: start", logged right after the last token and the report),
with no force kill in the log, no leaked semaphore or shared memory (the
resource tracker's warnings; /dev/shm before and after: what no live process uses 15 s
after the run, judged before the next run starts) and no process of it left
(every descendant seen, by pid and start time).

Stock vLLM CPU runs the same loop beside it (plugin inactive), so a failure says
whose it is: vLLM 0.32 gives its EngineCore 5 s from SIGTERM, its worker's exit
included, and stock spends them in garbage collection on a busy host
(vllm-project/vllm#48620); the template platform's processes end without it
(``patches.py``, ``end_spawned_processes_like_forked_ones``). The stock test fails
on what stock must still do (status 0, no process left) and reports the hang as an
expected failure naming the upstream issue when it shows.

Runs: ``SHUTDOWN_STRESS_RUNS`` template and ``SHUTDOWN_STRESS_STOCK_RUNS`` stock
(1 and 1 in the e2e tier, to keep CI short; ``tox -e shutdown-stress``: 20 and 20).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from engine_exit import stock_exit_abort
from shutdown_checks import (
    Descendants,
    busy_cores,
    force_kill_lines,
    leak_lines,
    leaked_shm,
    shm_entries,
    thread_states,
)

from vllm_platform_template.platform_hooks.entry_point import DEVICE_ENV

pytestmark = pytest.mark.e2e

TEMPLATE_RUNS = int(os.environ.get("SHUTDOWN_STRESS_RUNS", "1"))
SHM_GRACE_S = 15.0
STOCK_RUNS = int(os.environ.get("SHUTDOWN_STRESS_STOCK_RUNS", "1"))
EXIT_BOUND_S = 10.0
RUN_TIMEOUT_S = 600
# The engine is up: vLLM's line once the worker finished its warm-up.
ENGINE_UP = "init engine (profile, create kv cache, warmup model) took"
SHUTDOWN_START = "[shutdown] MPClient: start"
SIGTERM_SENT = "[shutdown] Process manager: send sigterm to process EngineCore"
# An engine process still running this long after SIGTERM has its stacks printed
# (vLLM force-kills it at 5 s): the dump names what it was blocked in.
DUMP_AFTER_S = 3.5
DUMP_SITE = Path(__file__).with_name("stack_dump_site")
DEMO_ARGS = ("--json", "--no-perplexity", "--max-tokens", "16")


@dataclass
class Run:
    stock: bool
    returncode: int | None = None
    exit_after_shutdown_s: float | None = None
    force_kills: list[str] = field(default_factory=list)
    leak_warnings: list[str] = field(default_factory=list)
    leaked_shm: list[str] = field(default_factory=list)
    left_alive: list[str] = field(default_factory=list)
    engine_threads: str = ""
    stderr: str = ""
    stdout: str = ""

    def problems(self) -> list[str]:
        found = []
        if self.returncode != 0:
            found.append(f"exit status {self.returncode}")
        if self.exit_after_shutdown_s is None or self.exit_after_shutdown_s > EXIT_BOUND_S:
            found.append(f"exit {self.exit_after_shutdown_s} s after the shutdown started")
        found += [f"log: {line.strip()}" for line in self.force_kills + self.leak_warnings]
        found += [f"/dev/shm/{name} left" for name in self.leaked_shm]
        found += [f"{proc} still running" for proc in self.left_alive]
        return found

    def after_sigterm(self) -> str:
        """The stderr from vLLM's SIGTERM to the EngineCore on: its reaction, the stacks."""
        start = self.stderr.find(SIGTERM_SENT)
        log = self.stderr[start:][-12000:] if start >= 0 else self.stderr[-4000:]
        return log + (
            f"--- engine threads then ---\n{self.engine_threads}\n" * bool(self.engine_threads)
        )

    def summary(self) -> str:
        who = "stock" if self.stock else "template"
        return f"{who}: exit {self.returncode} {self.exit_after_shutdown_s} s: {self.problems()}"


def run_once(cache_root: Path, stock: bool) -> Run:
    """One demo run; every core busy from the moment its engine is up until it exits."""
    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env["VLLM_CACHE_ROOT"] = str(cache_root)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(DUMP_SITE), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "vllm_platform_template_tools.cli.main", "demo", *DEMO_ARGS]
    if stock:
        cmd.append("--stock")
    shm_before = shm_entries()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = Run(stock=stock)
    marks: dict[str, float] = {}
    lines: list[str] = []
    out: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            for mark in (ENGINE_UP, SHUTDOWN_START, SIGTERM_SENT):
                if mark in line:
                    marks.setdefault(mark, time.monotonic())

    def read_stdout() -> None:
        assert proc.stdout is not None
        out.append(proc.stdout.read())

    readers = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
    for reader in readers:
        reader.start()
    descendants = Descendants(proc.pid)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while ENGINE_UP not in marks and proc.poll() is None and time.monotonic() < deadline:
        descendants.poll()
        time.sleep(0.2)
    dumped = False
    with busy_cores(seconds=max(1.0, deadline - time.monotonic())):
        while proc.poll() is None and time.monotonic() < deadline:
            descendants.poll()
            sent = marks.get(SIGTERM_SENT)
            if not dumped and sent is not None and time.monotonic() - sent > DUMP_AFTER_S:
                dumped = True  # an engine process outlives SIGTERM: print its threads
                run.engine_threads = dump_stacks(descendants)
            time.sleep(0.1)
        exited = time.monotonic()
        if proc.poll() is None:
            proc.kill()
        run.returncode = proc.wait()
        run.left_alive = descendants.wait_gone(timeout=10)
    for reader in readers:
        reader.join(timeout=30)  # stderr ends when the last process holding it (the tracker) exits
    if SHUTDOWN_START in marks:
        run.exit_after_shutdown_s = round(exited - marks[SHUTDOWN_START], 2)
    run.stderr, run.stdout = "".join(lines), "".join(out)
    run.force_kills = force_kill_lines(run.stderr)
    run.leak_warnings = leak_lines(run.stderr)
    # Judged before the next run starts, which could remove this run's entries: what no
    # live process uses 15 s after the run ended is its leak (another process's semaphore,
    # of an engine starting beside the loop, is mapped again by its child within that).
    run.leaked_shm = leaked_shm(shm_before, grace=SHM_GRACE_S)
    if stock and stock_exit_abort(["--stock"], _completed(run)):
        run.returncode = 0  # stock vLLM's known exit-time abort (tests/engine_exit.py)
    return run


def dump_stacks(descendants: Descendants) -> str:
    """SIGUSR1 (faulthandler, stack_dump_site: the stacks land in the run's stderr) to
    every vLLM engine process still running; returns their threads' kernel states
    (``thread_states``), which need no signal taken."""
    states = []
    for pid in descendants.engine_pids():
        states.append(thread_states(pid))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
    return "\n".join(states)


def _completed(run: Run) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], run.returncode or 0, run.stdout, run.stderr)


@pytest.fixture(scope="module")
def stress_runs(engine_runs) -> dict[str, list[Run]]:
    """Template and stock runs interleaved (the same host load for both), one at a time.

    They share the e2e tier's compile cache: what is measured is the shutdown."""
    cache = engine_runs.cache_root
    runs: dict[str, list[Run]] = {"template": [], "stock": []}
    wanted = {"template": TEMPLATE_RUNS, "stock": STOCK_RUNS}
    for i in range(max(TEMPLATE_RUNS, STOCK_RUNS)):
        for who in ("template", "stock"):
            if i >= wanted[who]:
                continue
            run = run_once(cache, stock=who == "stock")
            runs[who].append(run)
            # Each run as it ends: a loop of hundreds shows a hang's dump when it happens.
            print(f"shutdown stress {who} {i + 1}/{wanted[who]}: {run.summary()}", flush=True)
            if run.problems():
                print(f"--- its stderr from SIGTERM on ---\n{run.after_sigterm()}", flush=True)
    return runs


def test_template_engines_stop_at_once_and_cleanly_under_load(stress_runs) -> None:
    assert len(stress_runs["template"]) == TEMPLATE_RUNS > 0
    failed = [run for run in stress_runs["template"] if run.problems()]
    stock = [run.summary() for run in stress_runs["stock"]]
    assert not failed, (
        f"{len(failed)}/{TEMPLATE_RUNS} template runs did not stop cleanly: "
        + "\n".join(run.summary() for run in failed)
        + f"\nstock vLLM CPU beside it: {stock}\n"
        + "".join(
            f"--- failing run's stderr from SIGTERM on ---\n{run.after_sigterm()}" for run in failed
        )
    )


def test_stock_engines_under_the_same_load(stress_runs) -> None:
    """Stock must still exit 0 and leave nothing running; its hang is reported, not failed."""
    runs = stress_runs["stock"]
    if not runs:
        pytest.skip("SHUTDOWN_STRESS_STOCK_RUNS=0")
    for run in runs:
        assert run.returncode == 0, run.summary() + "\n" + run.stderr[-6000:]
        assert not run.left_alive, run.summary()
    hung = [run for run in runs if run.problems()]
    if hung:
        pytest.xfail(
            f"stock vLLM CPU did not stop cleanly in {len(hung)}/{len(runs)} runs: "
            f"{hung[0].summary()} (vLLM 0.32's EngineCore shutdown budget spent in garbage "
            "collection: vllm-project/vllm#48620)"
        )


def test_a_run_is_judged_by_its_log() -> None:
    """The checks see what they look for (a test that cannot fail is no test)."""
    kill = (
        "(MainProcess pid=1) WARNING 11-27 00:17:48 [utils.py:648] [shutdown] Process "
        "manager: force killing remaining processes count=1"
    )
    leak = (
        "resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 "
        "leaked shared_memory objects to clean up at shutdown"
    )
    run = Run(stock=False, returncode=0, exit_after_shutdown_s=1.0)
    assert run.problems() == []
    run.force_kills, run.leak_warnings = force_kill_lines(kill), leak_lines(leak)
    assert len(run.problems()) == 2
    assert Run(stock=False, returncode=0, exit_after_shutdown_s=10.5).problems()
    assert Run(stock=False, returncode=0, exit_after_shutdown_s=None).problems()

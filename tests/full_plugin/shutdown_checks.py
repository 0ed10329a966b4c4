"""Watching processes stop: core burners, descendants, /dev/shm, vLLM's force-kill lines.

Shared by the shutdown stress test and the serving tests (``tests`` is on
``sys.path`` through pytest's prepend import mode).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

SHM = Path("/dev/shm")
# vLLM's process manager and executor when a process outlived its grace (v1/utils.py,
# multiproc_executor.py, utils/system_utils.py), and multiprocessing's resource tracker
# when a killed process left its semaphores or shared memory behind.
FORCE_KILL_MARKS = (
    "force killing",
    "sending SIGKILL",
    "workers still running after grace period",
)
LEAK_MARKS = ("leaked semaphore", "leaked shared_memory")
BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def busy_cores(seconds: float, count: int | None = None) -> Iterator[list[int]]:
    """``count`` (default: every core) processes spinning for at most ``seconds``."""
    procs = [
        subprocess.Popen([sys.executable, "-c", BURN.format(seconds=seconds)])
        for _ in range(count or os.cpu_count() or 2)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


class Descendants:
    """Every process below ``pid`` seen while it runs, by (pid, start time)."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.seen: dict[int, tuple[float, str]] = {}

    def poll(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in self.root.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self.seen.setdefault(child.pid, (child.create_time(), child.name()))

    def _running(self, keep: Callable[[psutil.Process], bool]) -> list[tuple[psutil.Process, str]]:
        """The seen processes still running under their pid (not a reused pid) that
        ``keep`` takes, with the name each was first seen under."""
        found = []
        for pid, (created, name) in self.seen.items():
            with contextlib.suppress(psutil.Error):  # gone meanwhile
                proc = psutil.Process(pid)
                if proc.create_time() == created and keep(proc):
                    found.append((proc, name))
        return found

    def alive(self) -> list[str]:
        """The seen processes still running (a zombie has ended)."""
        running = self._running(lambda proc: proc.status() != psutil.STATUS_ZOMBIE)
        return [f"{name} (pid {proc.pid})" for proc, name in running]

    def engine_pids(self) -> list[int]:
        """The seen processes running now under a vLLM process title (``VLLM::...``): read
        now, since a spawned process renames itself after it was first seen."""
        running = self._running(lambda proc: proc.name().startswith("VLLM::"))
        return [proc.pid for proc, _ in running]

    def wait_gone(self, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left


def thread_states(pid: int) -> str:
    """Each thread of ``pid`` as the kernel sees it: its state, its blocked and pending
    signals and the kernel function it sleeps in - what a process that takes no signal
    (so prints no stack) is doing."""
    lines = [f"process {pid}:"]
    with contextlib.suppress(OSError):
        for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda t: int(t.name)):
            with contextlib.suppress(OSError):
                status = dict(
                    line.split(":", 1) for line in (task / "status").read_text().splitlines()
                )
                fields = {k: status.get(k, "?").strip() for k in ("Name", "State", "SigBlk")}
                pending = {k: status.get(k, "?").strip() for k in ("SigPnd", "ShdPnd")}
                wchan = (task / "wchan").read_text().strip() or "-"
                lines.append(
                    f"  tid {task.name} {fields['Name']}: {fields['State']}, blocked "
                    f"{fields['SigBlk']}, pending {pending['SigPnd']}/{pending['ShdPnd']}, "
                    f"in {wchan}"
                )
    return "\n".join(lines)


def shm_entries() -> set[str]:
    return {p.name for p in SHM.iterdir()} if SHM.is_dir() else set()


def _mapped_anywhere(name: str) -> bool:
    """True when a live process maps or holds open ``/dev/shm/name`` (not leaked)."""
    target = str(SHM / name)
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if target in Path(f"/proc/{proc.pid}/maps").read_text():
                return True
            if any(f.path == target for f in proc.open_files()):
                return True
    return False


def leaked_shm(before: set[str], grace: float = 5.0) -> list[str]:
    """Entries that appeared in /dev/shm since ``before`` and that no live process uses,
    still there after ``grace`` seconds (another process's entry comes and goes: the host
    may run other engines, whose multiprocessing semaphores live there too)."""
    deadline = time.monotonic() + grace
    while True:
        left = sorted(name for name in shm_entries() - before if not _mapped_anywhere(name))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def force_kill_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(m in line for m in FORCE_KILL_MARKS)]


def leak_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(m in line for m in LEAK_MARKS)]

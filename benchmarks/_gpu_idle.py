"""Proof that the engines not being measured are idle: their CPU time, and the GPU's samples.

``gpu_e2e.py`` keeps every engine alive and measures one at a time. Before each
measurement :class:`Window` waits (bounded) until the other engines use no CPU
(an engine keeps a core busy for about a second after its last request); around
the measurement it reads, from ``/proc``, the CPU time (user + system)
of every other engine's process tree (the probe and the engine core it
started): a process that used no CPU time cannot have launched GPU work, and
vLLM's idle engine core blocks on its input queue. The window also keeps
NVML's device utilisation samples and per-process SM utilisation taken during
it (``pynvml``, or vLLM's vendored copy; left out with the reason when NVML
does not answer): the device's share of busy time in the window, and any other engine
process that NVML saw on the GPU (process ids only match outside PID
namespaces, so NVML is evidence beside the CPU times, not the check).

:func:`pin_tree` moves a live engine, every thread of every process in its tree,
onto a set of cores (``_e2e_design.py``: the engine measured next onto the
measurement cores, the others onto the parking cores) and says which threads it
could not move.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int, proc: Path) -> list[str] | None:
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: split after its closing parenthesis
    return text[text.rindex(")") + 2 :].split()


def process_tree(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``pid`` and every descendant still alive."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name), proc)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def cpu_seconds(pids: list[int], proc: Path = Path("/proc")) -> float:
    """User + system CPU seconds of the processes (gone ones count 0)."""
    total = 0
    for pid in pids:
        fields = _stat(pid, proc)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / _TICK


def threads(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The thread ids of a process (none when it is gone)."""
    try:
        return sorted(int(t.name) for t in (proc / str(pid) / "task").iterdir())
    except OSError:
        return []


def pin_tree(pid: int, cpus: Sequence[int], proc: Path = Path("/proc")) -> dict[str, Any]:
    """Every thread of ``pid``'s process tree onto ``cpus`` (threads it starts later inherit
    their creator's cores); then read back: ``threads`` moved, and ``unpinned``, each thread
    still alive whose cores differ, with why."""
    wanted = set(cpus)
    moved, unpinned = 0, []
    for member in process_tree(pid, proc):
        for tid in threads(member, proc):
            try:
                os.sched_setaffinity(tid, wanted)
                if os.sched_getaffinity(tid) != wanted:
                    unpinned.append(f"{member}/{tid}: on {sorted(os.sched_getaffinity(tid))}")
                    continue
                moved += 1
            except ProcessLookupError:  # the thread ended meanwhile
                continue
            except OSError as exc:
                unpinned.append(f"{member}/{tid}: {exc}")
    return {"threads": moved, "unpinned": unpinned}


def _nvml() -> Any:
    """``pynvml``, else vLLM's vendored copy loaded by path (importing the ``vllm``
    package would run its environment overrides in the benchmark's own process)."""
    try:
        import pynvml

        return pynvml
    except ImportError:
        pass
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("neither pynvml nor vLLM's vendored copy is installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "third_party" / "pynvml.py"
    module_spec = importlib.util.spec_from_file_location("_bench_pynvml", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # it looks itself up there while loading
    module_spec.loader.exec_module(module)
    return module


class Window:
    """One measurement window: other engines' CPU time and NVML's samples across it."""

    def __init__(
        self,
        engine: str,
        op: str,
        round_: int,
        others: dict[str, int],
        device: int = 0,
        settle_limit: float = 0.05,
        settle_max_s: float = 5.0,
    ) -> None:
        self.record: dict[str, Any] = {"engine": engine, "op": op, "round": round_}
        self._settle_limit, self._settle_max_s = settle_limit, settle_max_s
        self._trees = {name: process_tree(pid) for name, pid in others.items()}
        self._device = device
        self._nvml: Any = None
        self._handle: Any = None
        try:
            self._nvml = _nvml()
            self._nvml.nvmlInit()
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(device)
        except Exception as exc:  # no NVML: the CPU times still decide
            self.record["nvml"] = f"unavailable: {exc}"
            self._nvml = None

    def _settle(self, step: float = 0.25) -> float:
        """Wait (at most ``settle_max_s``) until no other engine uses CPU: seconds waited.

        An engine keeps a core busy for about a second after its last request (seen
        on the CPU machine with vLLM 0.32): the window starts once that has passed.
        """
        waited, quiet = 0.0, max(self._settle_limit * step, 1 / _TICK) + 1e-9
        while waited < self._settle_max_s:
            before = {name: cpu_seconds(tree) for name, tree in self._trees.items()}
            time.sleep(step)
            waited += step
            used = [cpu_seconds(tree) - before[n] for n, tree in self._trees.items()]
            if max(used, default=0.0) <= quiet:
                break
        return waited

    def __enter__(self) -> Window:
        if self._trees:
            self.record["settle_s"] = self._settle()
        self._cpu = {name: cpu_seconds(tree) for name, tree in self._trees.items()}
        self._begin = time.perf_counter()
        self._begin_us = int(time.time() * 1e6)
        return self

    def __exit__(self, *exc: object) -> None:
        self.record["wall_s"] = time.perf_counter() - self._begin
        self.record["others_cpu_s"] = {
            name: round(cpu_seconds(tree) - self._cpu[name], 4)
            for name, tree in self._trees.items()
        }
        if self._nvml is not None:
            self.record.update(self._gpu_samples())
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()

    def _gpu_samples(self) -> dict[str, Any]:
        nv, out = self._nvml, {}
        try:
            _, samples = nv.nvmlDeviceGetSamples(
                self._handle, nv.NVML_GPU_UTILIZATION_SAMPLES, self._begin_us
            )
            util = [s.sampleValue.uiVal for s in samples if s.timeStamp >= self._begin_us]
            if util:
                out["gpu_util_mean"] = sum(util) / len(util)
                out["gpu_util_samples"] = len(util)
        except Exception as exc:
            out["gpu_util"] = f"unavailable: {exc}"
        try:
            per_pid: dict[int, int] = {}
            for s in nv.nvmlDeviceGetProcessUtilization(self._handle, self._begin_us):
                per_pid[s.pid] = max(per_pid.get(s.pid, 0), s.smUtil)
            others = {pid for tree in self._trees.values() for pid in tree}
            out["others_sm_util_max"] = max(
                (u for pid, u in per_pid.items() if pid in others), default=0
            )
            out["nvml_pids_seen"] = sorted(per_pid)
        except Exception as exc:
            out["process_util"] = f"unavailable: {exc}"
        return out

"""Shared helpers of the benchmark scripts: engine probes in own processes, tables."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

PROBE = Path(__file__).with_name("_engine_probe.py")


class EngineProbe:
    """A live engine in a fresh process (own VLLM_CACHE_ROOT unless given: init is cold)."""

    def __init__(
        self, spec: dict[str, Any], cache_root: str | None = None, wait: bool = True
    ) -> None:
        env = dict(os.environ)
        env.pop("VLLM_TEMPLATE_DEVICE", None)
        self.cache_root = cache_root or tempfile.mkdtemp(prefix="vllm-bench-")
        env["VLLM_CACHE_ROOT"] = self.cache_root
        # the engine core imports the benchmark's worker extension (_bench_worker.py) by name
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROBE.parent), env.get("PYTHONPATH", "")) if p
        )
        env.update(spec.get("env", {}))
        self.spec = spec
        # stays open for the probe's lifetime; closed in close()
        self._log: IO[str] = tempfile.NamedTemporaryFile(  # noqa: SIM115
            "w+", prefix="probe-", suffix=".log", delete=False
        )
        self._proc = subprocess.Popen(
            [sys.executable, str(PROBE), json.dumps(spec)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.init: dict[str, Any] = self._read() if wait else {}

    @property
    def pid(self) -> int:
        """The probe's process id (the engine core runs in a child of it)."""
        return self._proc.pid

    def wait_init(self) -> dict[str, Any]:
        """The init answer of a probe started with ``wait=False`` (engines start side by side)."""
        if not self.init:
            self.init = self._read()
        return self.init

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait()
            self._log.seek(0)
            tail = self._log.read()[-4000:]
            raise RuntimeError(f"probe {self.spec} exited ({self._proc.returncode}):\n{tail}")
        return json.loads(line)

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(command) + "\n")
        self._proc.stdin.flush()
        return self._read()

    def quit(self) -> None:
        """Ask the engine to shut down without waiting (close several at once, then wait)."""
        if self._proc.poll() is None and self._proc.stdin and not self._proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self._proc.stdin.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self.quit()
            try:
                self._proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._log.close()
        os.unlink(self._log.name)


def init_seconds(spec: dict[str, Any], cache_root: str | None = None) -> float:
    """Engine init seconds of one start in a fresh process."""
    probe = EngineProbe(spec, cache_root)
    probe.close()
    return float(probe.init["init_s"])


def machine() -> str:
    import platform

    import torch

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {platform.python_version()}"


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row.get(c, "-")).ljust(widths[c]) for c in columns))

"""Shared test configuration: the layout, the helpers, the engine runs tests share.

Tests live by destination - the code they need decides the folder, so the
generator composes whole folders (``cli/new.py``) and a new test file needs no
edit anywhere else:

- ``shared/``: the shared layers every plugin has, a first-light one too;
- ``full_plugin/``: what only the full plugin has - the shared speed tier
  (compiler, graphs, the hand-fused model, LoRA, the conformance kit) and the
  engines that prove the shared layers on the device ``tests/device.env`` names
  (the CPU reference backend here);
- ``devices/<device>/``: one device folder's tests, its first-light tier at the
  top and its speed tier under ``speed_tier/`` (the tests that need the device
  itself are marked with the device's marker and skipped without it);
- ``project/``: the template project's own tooling (its generator, its device
  tier's bundle and script, vLLM's upstream tests, its benchmarks' statistics),
  which a plugin made from it does not copy;
- ``test_device/``: the PrivateUse1 test device, a package of its own.

A plugin has the folders of its shape (a first-light one: ``shared/``, its
device's first-light tests, ``test_device/``).

Tiers cut across the folders by marker: ``e2e`` tests start vLLM engines (tens of
seconds each on a 2-core machine), so they share engine runs through the
session-scoped fixtures below; ``pytest -m "not e2e"`` is the fast tier. This
directory is on ``sys.path`` (pytest's prepend import mode), so the helpers here
(``hf_reference``, ``logprob_closeness``, ``engine_exit``, ...) import by name
from every folder, and so do the full plugin's (``full_plugin/``: ``serving``,
``fault_runner``, ``bf16_reference``, ...), which the device folders' speed tiers
share; a helper only one folder uses lives in that folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import feature_matrix
import pytest
from engine_exit import stock_exit_abort

from vllm_platform_template.platform_hooks.entry_point import DEVICE_ENV

# The full plugin's helpers, for the device folders' speed tiers (absent at first light).
FULL_PLUGIN_HELPERS = Path(__file__).with_name("full_plugin")
if FULL_PLUGIN_HELPERS.is_dir() and str(FULL_PLUGIN_HELPERS) not in sys.path:
    sys.path.insert(1, str(FULL_PLUGIN_HELPERS))


@pytest.fixture(autouse=True)
def _environment_as_found() -> Iterator[None]:
    """Each test leaves the process environment as it found it.

    Platform hooks a test runs in this process set variables for the engine processes
    they would start (the CPU platform's ``VLLM_USE_V2_MODEL_RUNNER=0``, the spawn start
    method): kept, they reach every process a later test starts - a generated plugin's
    first-light engine then skipped its first-light defaults and their log line, which
    failed CI once the tests ran in folder order.
    """
    saved = dict(os.environ)
    yield
    for key in set(os.environ) - set(saved):
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def _no_template_device_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start with the plugin inactive unless they set the device themselves."""
    if DEVICE_ENV in os.environ:
        monkeypatch.delenv(DEVICE_ENV)


_terminal: list[object] = []


def pytest_configure(config: pytest.Config) -> None:
    _terminal.append(config.pluginmanager.get_plugin("terminalreporter"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``TEMPLATE_TEST_FAILURES_AT_ONCE=1``, print each failure when it happens.

    The GPU tier's calls end at a hard time limit; pytest (and pytest-xdist's
    controller) print failure details only at the end of the session, so a call
    cut off would name a failed test without saying why.
    """
    if not (report.failed and os.environ.get("TEMPLATE_TEST_FAILURES_AT_ONCE") == "1"):
        return
    text = f"--- {report.nodeid} ({report.when}) failed:\n{report.longreprtext[-6000:]}"
    terminal = _terminal[-1] if _terminal else None
    if terminal is not None:
        terminal.write_line(text)  # type: ignore[attr-defined]
    else:
        print(text)


# --- engine runs shared by the end-to-end tests ------------------------------------
# Each run is one ``vllm-template demo --json`` subprocess (a fresh vLLM engine, tens
# of seconds on a 2-core machine). EngineRuns memoises runs by their arguments for the
# whole session, so tests in different modules that need the same engine share one
# start. Stock vLLM runs are the same command with ``--stock`` (plugin inactive), also
# in a separate process.
RUN_TIMEOUT_S = 900
FUSION_ONLY = ("--compile-stage", "fusion_only")


class EngineRunError(AssertionError):
    pass


class EngineRuns:
    """Runs ``vllm-template demo --json`` once per distinct argument list."""

    def __init__(self, cache_root: Path) -> None:
        self.cache_root = cache_root
        self._results: dict[tuple, dict[str, Any]] = {}

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cache_root: Path | None = None,
        label: str = "",
    ) -> dict[str, Any]:
        """Report of one engine run; ``label`` distinguishes deliberate repeats (warm starts)."""
        key = (args, tuple(sorted((env or {}).items())), str(cache_root), label)
        if key not in self._results:
            self._results[key] = self._run(list(args), env or {}, cache_root or self.cache_root)
        return self._results[key]

    def run_script(self, script: Path, *args: str, cache_root: Path | None = None) -> dict:
        """One run of ``python script args`` that prints a demo-like report as its last line;
        its exit status is the caller's to judge (e.g. a fault injected on purpose)."""
        key = ("script", str(script), args, str(cache_root))
        if key not in self._results:
            cmd = [sys.executable, str(script), *args]
            self._results[key] = self._run(cmd, {}, cache_root or self.cache_root, check=False)
        return self._results[key]

    def _run(
        self, args: list[str], env_overrides: dict[str, str], cache_root: Path, check: bool = True
    ) -> dict:
        env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
        env["VLLM_CACHE_ROOT"] = str(cache_root)
        env.update(env_overrides)
        if args and args[0] == sys.executable:
            cmd = args
        else:
            cmd = [
                sys.executable,
                "-m",
                "vllm_platform_template_tools.cli.main",
                "demo",
                "--json",
                *args,
            ]
        shm_before = _shm_entries()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        shm_left = sorted(_shm_entries() - shm_before)
        if check and proc.returncode != 0 and not stock_exit_abort(args, proc):
            raise EngineRunError(
                f"{' '.join(cmd)} exited with {proc.returncode}\n--- stderr (tail) ---\n"
                + proc.stderr[-6000:]
            )
        lines = proc.stdout.strip().splitlines()
        if not lines:
            raise EngineRunError(f"no output from {cmd}\n{proc.stderr[-6000:]}")
        report = json.loads(lines[-1])
        report["_stderr"] = proc.stderr
        report["_shm_left"] = shm_left  # /dev/shm entries the run made and left behind
        return report


def _shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.fixture(scope="session")
def engine_runs(tmp_path_factory: pytest.TempPathFactory) -> EngineRuns:
    return EngineRuns(tmp_path_factory.mktemp("vllm-cache"))


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compile cache the compiler and fault tests share, filled by the fusion-only
    stage's cold run (``fusion_only_run``); a test that damages a cache damages a copy
    (``filled_cache_copy``)."""
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture(scope="session")
def fusion_only(engine_runs: EngineRuns):
    """``fusion_only(*args, cache_root=..., env=..., label=...)``: a run of the
    fusion-only compile stage (``EngineRuns.run``)."""
    return lambda *args, **options: engine_runs.run(*FUSION_ONLY, *args, **options)


@pytest.fixture(scope="session")
def fusion_only_run(fusion_only, compile_cache: Path) -> dict[str, Any]:
    """The fusion-only stage's cold run into ``compile_cache`` (once per session)."""
    return fusion_only(cache_root=compile_cache)


@pytest.fixture
def filled_cache_copy(compile_cache: Path, fusion_only_run: dict, tmp_path: Path) -> Path:
    """A copy of ``compile_cache`` after the cold run: a warm start wherever it lies
    (``test_compiler.py::test_warm_start_loads_instead_of_compiling`` runs on one)."""
    return Path(shutil.copytree(compile_cache, tmp_path / "cache", symlinks=True))


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    from vllm_platform_template_tools.embedded_model import ensure_model  # safetensors: e2e only

    return ensure_model("tiny")


@pytest.fixture(scope="session")
def hf_greedy(tiny_model_dir: Path):
    """Greedy continuation of token-id prompts by Hugging Face transformers (fp32, CPU)."""
    from hf_reference import hf_greedy_on

    return hf_greedy_on(tiny_model_dir, "cpu")


@pytest.fixture(scope="session")
def hf_greedy_of():
    """``hf_greedy_of(model_dir)``: ``hf_greedy`` for another embedded model (one load each)."""
    loaded: dict[Path, Any] = {}

    def of(model_dir: Path):
        from hf_reference import hf_greedy_on

        if model_dir not in loaded:
            loaded[model_dir] = hf_greedy_on(model_dir, "cpu")
        return loaded[model_dir]

    return of


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Feature tests' outcomes and matrix cells, for the support matrix (feature_matrix.py)."""
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("feature")
    if marker is None or not (report.when == "call" or report.outcome != "passed"):
        return
    cell = dict(report.user_properties).get("matrix", "")
    reason = ""
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    feature_matrix.record(item, report.outcome, cell, reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``after_features`` run last: they read the feature tests' results,
    which live in folders pytest reaches later (``shared/`` after ``full_plugin/``)."""
    items.sort(key=lambda item: item.get_closest_marker("after_features") is not None)


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("SUPPORT_MATRIX_RESULTS")
    results = session.config.stash.get(feature_matrix.RESULTS, None)
    if path and results:
        record = feature_matrix.session_record(results)
        Path(path).write_text(json.dumps(record, indent=1) + "\n")

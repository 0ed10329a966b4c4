"""``benchmarks/gpu_e2e.py``'s arithmetic and checks, on the CPU with made-up probe results.

No GPU and no engine: the ratio/median/range maths (``_e2e_stats.py``), the
checks that fail the run (``_e2e_checks.py``), the idle proof's CPU-time
reading (``_gpu_idle.py``, against real idle and busy processes), and the
benchmark's whole flow with a fake ``EngineProbe`` answering scripted figures:
a harness whose stock differs from stock alone, rounds that spread, engines
whose arguments differ and a run without stock's default backend all end with
exit status 1 and say why.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _e2e_checks as checks
import _e2e_stats as stats
import _gpu_idle as idle
import gpu_e2e

# --- ratio, median, range ---------------------------------------------------------------


def test_ratios_are_per_round_then_median_not_a_ratio_of_medians() -> None:
    runs = {
        "stock": {"step_ms_b1": [1.0, 2.0, 4.0]},
        "template": {"step_ms_b1": [2.0, 1.0, 2.0]},
    }
    ratio = stats.ratio_summary(runs, "stock")["template"]["step_ms_b1"]
    assert ratio["values"] == [2.0, 0.5, 0.5]
    assert ratio["median"] == 0.5 and ratio["range"] == [0.5, 2.0]
    # the ratio of the medians would have read 1.0
    assert stats.median_range([2.0, 1.0, 2.0])["median"] / stats.median_range([1, 2, 4])[
        "median"
    ] == pytest.approx(1.0)


def test_a_rate_is_inverted_so_every_ratio_is_engine_time_over_stock_time() -> None:
    # template prefills twice as fast: half stock's time
    assert stats.time_ratios("prefill_tok_s", [200.0], [100.0]) == [0.5]
    assert stats.time_ratios("step_ms_b1", [2.0], [1.0]) == [2.0]


def test_rounds_must_pair() -> None:
    with pytest.raises(ValueError, match="3 rounds against 2"):
        stats.time_ratios("step_ms_b1", [1, 2, 3], [1, 2])


def test_spread_and_the_round_to_measure_again() -> None:
    assert stats.spread([1.0, 1.1, 1.2]) == pytest.approx(0.2 / 1.1)
    runs = {"a": {"m": [1.0, 1.0, 1.02]}, "b": {"m": [1.0, 1.6, 1.05]}}
    assert stats.widest(runs, ["m"], 0.25) == ("b", "m", 1, pytest.approx(0.6 / 1.05))
    assert stats.widest(runs, ["m"], 0.7) is None


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        stats.median_range([])


# --- the checks -------------------------------------------------------------------------


def _engine(**kwargs: Any) -> dict[str, Any]:
    base = {"model": "/m", "dtype": "bfloat16", "max_num_batched_tokens": 8192, "seed": 0}
    env = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    return {"kwargs": base | kwargs, "env": env}


def test_engines_that_differ_only_in_the_platform_pass() -> None:
    engines = {
        "gpu-stock": _engine(),
        "gpu-stock-triton": _engine(attention_backend="TRITON_ATTN"),
        "gpu-template-fused": _engine(additional_config={"template": {"model_impl": "fused"}}),
    }
    engines["gpu-stock"]["env"]["VLLM_PLUGINS"] = "none"
    engines["gpu-template-fused"]["env"]["VLLM_TEMPLATE_DEVICE"] = "cuda"
    assert checks.argument_differences(engines) == []


def test_a_dtype_that_differs_is_named() -> None:
    # the first harness's fault: stock's dtype followed a CPU rule and fell to float32
    engines = {"gpu-stock": _engine(dtype="float32"), "gpu-template": _engine()}
    (problem,) = checks.argument_differences(engines)
    assert "dtype" in problem and "float32" in problem and "bfloat16" in problem


def test_an_argument_or_variable_one_engine_lacks_is_named() -> None:
    engines = {"gpu-stock": _engine(), "gpu-template": _engine(max_num_seqs=64)}
    engines["gpu-template"]["env"]["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    problems = checks.argument_differences(engines)
    assert any("max_num_seqs" in p and "<absent>" in p for p in problems)
    assert any("VLLM_USE_V2_MODEL_RUNNER" in p for p in problems)


def test_stock_alone_within_ten_percent_passes_beyond_fails() -> None:
    plain = {"step_ms_b1": [1.0, 1.1, 0.9], "prefill_tok_s": [100.0, 100.0, 100.0]}
    assert (
        checks.baseline_differences({"step_ms_b1": [1.05] * 5, "prefill_tok_s": [95] * 5}, plain)
        == []
    )
    (problem,) = checks.baseline_differences(
        {"step_ms_b1": [1.5] * 5, "prefill_tok_s": [100] * 5}, plain
    )
    assert "step_ms_b1" in problem and "+50 %" in problem


def test_stock_alone_needs_three_measurements_and_the_harness_the_metric() -> None:
    problems = checks.baseline_differences({"step_ms_b1": [1.0]}, {"step_ms_b1": [1.0, 1.0]})
    assert problems == ["step_ms_b1: the plain run has 2 measurements, not 3+"]
    problems = checks.baseline_differences({}, {"step_ms_b8": [1.0, 1.0, 1.0]})
    assert "not in the harness" in problems[0]


def test_rounds_that_spread_past_a_quarter_fail() -> None:
    runs = {"a": {"step_ms_b1": [1.0, 1.3, 1.0]}, "b": {"step_ms_b1": [1.0, 1.2, 1.1]}}
    (problem,) = checks.spread_failures(runs, ["step_ms_b1"])
    assert problem.startswith("a step_ms_b1: rounds spread 30 %")


def test_a_window_where_another_engine_used_cpu_fails() -> None:
    windows = [
        {"engine": "a", "op": "round", "round": 0, "wall_s": 2.0, "others_cpu_s": {"b": 0.01}},
        {"engine": "b", "op": "round", "round": 0, "wall_s": 2.0, "others_cpu_s": {"a": 0.5}},
    ]
    (problem,) = checks.idle_failures(windows)
    assert "a used 0.500 s of CPU" in problem


def test_goals_are_unmet_without_stocks_default_backend() -> None:
    ratios = {"gpu-template": {"step_ms_b1": {"median": 0.5, "range": [0.4, 0.6]}}}
    rows = checks.goals("1.1b", ratios, {}, "gpu-stock", "gpu-template", stock_ran=False)
    assert rows and all(r["status"].startswith("unmet") for r in rows)
    rows = checks.goals("1.1b", ratios, {}, "gpu-stock", "gpu-template", stock_ran=True)
    assert rows[0]["status"] == "met"  # batch 1, 0.5 <= 0.91
    assert rows[1]["status"] == "unmet: not measured"  # batch 8


# --- the idle proof ---------------------------------------------------------------------


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.5)  # past the interpreter's start
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def spinner():
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield proc
    proc.kill()
    proc.wait()


def test_an_idle_engine_uses_no_cpu_in_the_window(sleeper) -> None:
    with idle.Window("a", "round", 0, {"b": sleeper.pid}) as window:
        time.sleep(0.3)
    assert window.record["others_cpu_s"] == {"b": 0.0}
    assert checks.idle_failures([window.record]) == []


def test_a_busy_engine_is_caught(spinner) -> None:
    with idle.Window("a", "round", 0, {"b": spinner.pid}, settle_max_s=0.5) as window:
        time.sleep(1.0)
    assert window.record["settle_s"] == 0.5  # it never settled: waited the most, then measured
    assert window.record["others_cpu_s"]["b"] > 0.3
    assert checks.idle_failures([window.record])


def test_the_window_waits_for_an_engine_still_busy_after_its_request() -> None:
    # busy for ~0.7 s (as an engine after its last request), then idle
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 0.7: pass\n"
         "time.sleep(30)"]
    )  # fmt: skip
    try:
        with idle.Window("a", "round", 0, {"b": proc.pid}) as window:
            time.sleep(0.5)
        assert window.record["settle_s"] >= 0.5
        assert window.record["others_cpu_s"]["b"] <= 0.02
        assert checks.idle_failures([window.record]) == []
    finally:
        proc.kill()
        proc.wait()


def test_nvml_bindings_load_without_importing_vllm() -> None:
    # vLLM's package import runs its environment overrides: not in the benchmark's process
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); import _gpu_idle; "
        "m = _gpu_idle._nvml(); print(callable(m.nvmlInit), 'vllm' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "False"], out.stderr


def test_the_process_tree_holds_the_children(tmp_path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; "
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"]
    )  # fmt: skip
    try:
        for _ in range(50):
            if len(idle.process_tree(parent.pid)) == 2:
                break
            time.sleep(0.1)
        tree = idle.process_tree(parent.pid)
        assert tree[0] == parent.pid and len(tree) == 2
    finally:
        for pid in idle.process_tree(parent.pid)[::-1]:
            subprocess.run(["kill", str(pid)], check=False)
        parent.wait()


# --- the whole flow, with fake engines --------------------------------------------------


class FakeProbe:
    """Answers like ``_engine_probe.py`` from a script: figures(variant, instance, op)."""

    script: Any = None
    made: list[str] = []

    def __init__(self, spec: dict[str, Any], cache_root: str | None = None, wait: bool = True):
        variant = spec["variant"]
        self.variant, self.cache_root = variant, cache_root or f"/cache/{variant}"
        self.instance = FakeProbe.made.count(variant)
        FakeProbe.made.append(variant)
        self.calls = 0
        self._sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        kwargs = {k: v for k, v in spec.items() if k not in ("variant", "env")}
        kwargs |= FakeProbe.script.get("kwargs", {}).get(variant, {})
        self.init = {
            "init_s": 1.0,
            "kwargs": kwargs,
            "env": {},
            "resolved": {
                "dtype": kwargs["dtype"],
                "attention_backends": ["TRITON_ATTN (TritonAttentionImpl)"]
                if variant == "gpu-stock-triton"
                else ["FLASH_ATTN (FlashAttentionImpl)"],
            },
        }

    @property
    def pid(self) -> int:
        return self._sleep.pid

    def wait_init(self) -> dict[str, Any]:
        return self.init

    def ask(self, **command: Any) -> dict[str, Any]:
        if command["op"] == "prefill_diag":
            return {"steps": [{"tokens": 2048, "requests": 1, "host_s": 0.01}]}
        self.calls += 1
        value = FakeProbe.script["figures"](self, command)
        if command["op"] == "step":
            return {"step_ms": value, "ttft_ms": 10.0}
        return {"prefill_tok_s": value}

    def quit(self) -> None:
        self._sleep.terminate()

    def close(self) -> None:
        self._sleep.kill()
        self._sleep.wait()


BASE = {"gpu-stock": 2.0, "gpu-stock-triton": 2.2, "gpu-template": 1.6, "gpu-template-fused": 1.5}


def _steady(probe: FakeProbe, command: dict[str, Any]) -> float:
    if command["op"] == "prefill":
        return 100_000.0
    return BASE[probe.variant] * (1 + command["batch"] / 100)


def _run(monkeypatch, tmp_path, figures=_steady, kwargs=None, argv=()) -> tuple[int, dict]:
    FakeProbe.script = {"figures": figures, "kwargs": kwargs or {}}
    FakeProbe.made = []
    monkeypatch.setattr(gpu_e2e, "EngineProbe", FakeProbe)
    # the fake engines are sleeping processes: no need to wait for them to settle
    monkeypatch.setattr(gpu_e2e, "Window", functools.partial(idle.Window, settle_max_s=0.0))
    monkeypatch.setattr(
        gpu_e2e,
        "device_rates",
        lambda: {"copy_bytes_per_s": 3e12, "gemm_flops": 7e14, "device": "fake"},
    )
    out = tmp_path / "e2e.json"
    rc = gpu_e2e.main(["--rounds", "5", "--json", str(out), *argv])
    return rc, json.loads(out.read_text())


def test_a_steady_run_passes_and_reports_ratios_and_goals(monkeypatch, tmp_path, capsys) -> None:
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 0, result["self_check"]
    assert result["self_check"] == {"passed": True, "problems": []}
    ratio = result["summary"]["gpu-template"]["vs_stock"]["step_ms_b1"]
    assert ratio["median"] == pytest.approx(0.8) and len(ratio["values"]) == 5
    assert result["summary"]["gpu-template"]["vs_stock_triton"]["step_ms_b1"]["median"] == (
        pytest.approx(1.6 / 2.2)
    )
    assert len(result["plain"]["runs"]["step_ms_b1"]) == 3
    assert FakeProbe.made.count("gpu-stock") == 2  # the harness's and the plain one
    assert {g["status"] for g in result["goals"]["gpu-template"]} >= {"met", "missed"}
    assert len(result["windows_used"]) == 4 * 5
    assert "self-check passed" in capsys.readouterr().out


def test_stock_slower_in_the_harness_than_alone_fails_loudly(monkeypatch, tmp_path, capsys) -> None:
    def figures(probe: FakeProbe, command: dict[str, Any]) -> float:
        value = _steady(probe, command)
        if probe.variant == "gpu-stock" and probe.instance == 0 and command["op"] == "step":
            return value * 1.5  # the harness's stock runs 1.5x slower than stock alone
        return value

    rc, result = _run(monkeypatch, tmp_path, figures)
    assert rc == 1
    assert any("stock alone" in p and "step_ms_b1" in p for p in result["self_check"]["problems"])
    assert "SELF-CHECK FAILED" in capsys.readouterr().err


def test_an_outlier_round_is_measured_again(monkeypatch, tmp_path) -> None:
    def figures(probe: FakeProbe, command: dict[str, Any]) -> float:
        value = _steady(probe, command)
        # the template's second round (its 2nd step call at batch 1) is an outlier
        if probe.variant == "gpu-template" and probe.calls == 5:
            return value * 2
        return value

    rc, result = _run(monkeypatch, tmp_path, figures)
    assert rc == 0, result["self_check"]
    assert result["repeats"] == 1
    (replaced,) = [r for r in result["replaced"] if r["engine"] == "gpu-template"]
    assert replaced["round"] == 1 and replaced["figures"]["step_ms_b1"] == pytest.approx(3.232)
    assert max(result["runs"]["gpu-template"]["step_ms_b1"]) == pytest.approx(1.616)


def test_rounds_that_keep_spreading_fail_after_the_bounded_repeats(monkeypatch, tmp_path) -> None:
    def figures(probe: FakeProbe, command: dict[str, Any]) -> float:
        value = _steady(probe, command)
        if probe.variant == "gpu-template-fused" and command["op"] == "prefill":
            return value * (1 + probe.calls % 3)  # 1x, 2x, 3x: never settles
        return value

    rc, result = _run(monkeypatch, tmp_path, figures, argv=["--max-repeats", "2"])
    assert rc == 1 and result["repeats"] == 2
    assert any(
        p.startswith("gpu-template-fused prefill_tok_s: rounds spread")
        for p in result["self_check"]["problems"]
    )


def test_engines_with_different_arguments_are_not_measured(monkeypatch, tmp_path) -> None:
    rc, result = _run(monkeypatch, tmp_path, kwargs={"gpu-stock": {"dtype": "float32"}})
    assert rc == 1
    assert any("dtype" in p for p in result["self_check"]["problems"])
    assert result["runs"]["gpu-template"] == {} and result["plain"] is None


def test_an_environment_that_differs_is_measured_but_fails(monkeypatch, tmp_path) -> None:
    real_init = FakeProbe.__init__

    def init(self, spec, cache_root=None, wait=True):
        real_init(self, spec, cache_root, wait)
        if self.variant == "gpu-template":
            self.init["env"] = {"VLLM_USE_V2_MODEL_RUNNER": "0"}

    monkeypatch.setattr(FakeProbe, "__init__", init)
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 1 and len(result["runs"]["gpu-template"]["step_ms_b1"]) == 5
    assert any("VLLM_USE_V2_MODEL_RUNNER" in p for p in result["self_check"]["problems"])


def test_stock_default_that_fell_back_to_triton_meets_no_goal(monkeypatch, tmp_path) -> None:
    real_init = FakeProbe.__init__

    def init(self, spec, cache_root=None, wait=True):
        real_init(self, spec, cache_root, wait)
        if self.variant == "gpu-stock":  # FlashAttention's file did not load
            self.init["resolved"]["attention_backends"] = ["TRITON_ATTN (TritonAttentionImpl)"]

    monkeypatch.setattr(FakeProbe, "__init__", init)
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 1
    assert any("not FLASH_ATTN" in p for p in result["self_check"]["problems"])
    assert all(g["status"].startswith("unmet") for g in result["goals"]["gpu-template"][:4])


def test_stock_alone_must_get_the_harness_stocks_arguments(monkeypatch, tmp_path) -> None:
    real_init = FakeProbe.__init__

    def init(self, spec, cache_root=None, wait=True):
        real_init(self, spec, cache_root, wait)
        if self.variant == "gpu-stock" and self.instance == 1:
            self.init["kwargs"] = self.init["kwargs"] | {"max_num_batched_tokens": 2048}

    monkeypatch.setattr(FakeProbe, "__init__", init)
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 1
    assert any(p.startswith("stock alone: kwargs['max_num_batched_tokens']")
               for p in result["self_check"]["problems"])  # fmt: skip


def test_backend_problem_reads_every_layer() -> None:
    ok = {"attention_backends": ["FLASH_ATTN (FlashAttentionImpl)"]}
    assert checks.backend_problem(ok, "FLASH_ATTN") is None
    mixed = {"attention_backends": ["FLASH_ATTN (X)", "TRITON_ATTN (Y)"]}
    assert "TRITON_ATTN" in checks.backend_problem(mixed, "FLASH_ATTN")
    assert "unknown" in checks.backend_problem({"error": "boom"}, "FLASH_ATTN")


def test_without_stocks_default_backend_no_goal_is_met(monkeypatch, tmp_path) -> None:
    rc, result = _run(monkeypatch, tmp_path, argv=["--variants", "gpu-stock-triton,gpu-template"])
    assert rc == 1
    assert any("gpu-stock (stock's default backend) did not run" in p
               for p in result["self_check"]["problems"])  # fmt: skip
    assert all(g["status"].startswith("unmet") for g in result["goals"]["gpu-template"])


def test_an_engine_that_dies_mid_run_leaves_its_figures_and_fails(monkeypatch, tmp_path) -> None:
    def figures(probe: FakeProbe, command: dict[str, Any]) -> float:
        if probe.variant == "gpu-template" and probe.calls == 10:
            raise RuntimeError("probe exited (-9)")
        return _steady(probe, command)

    rc, result = _run(monkeypatch, tmp_path, figures)
    assert rc == 1 and "summary" not in result
    assert len(result["runs"]["gpu-template"]["step_ms_b1"]) == 2  # rounds 1-2, whole
    assert any("probe exited (-9)" in p for p in result["self_check"]["problems"])


def test_fewer_than_five_rounds_is_refused() -> None:
    with pytest.raises(SystemExit):
        gpu_e2e.main(["--rounds", "3"])


def test_the_charts_headline_says_how_the_self_check_ended() -> None:
    """The JSON's self_check is {"passed", "problems"}: a passed check is said as passed (the
    headline once said FAILED for any run, counting the dict's two keys as findings)."""
    import _e2e_report as report

    passed = {"self_check": {"passed": True, "problems": []}}
    failed = {"self_check": {"passed": False, "problems": ["a", "b", "c"]}}
    assert report.verdict(passed) == "self-check passed"
    assert report.verdict(failed).startswith("SELF-CHECK FAILED (3 findings)")
    assert report.verdict({}).startswith("SELF-CHECK FAILED (0 findings)")  # no check ran

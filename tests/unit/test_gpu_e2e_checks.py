"""``benchmarks/gpu_e2e.py``'s arithmetic and checks, on the CPU with made-up probe results.

No GPU and no engine: the quad ratios, bootstrap intervals and verdicts
(``_e2e_stats.py``), the checks that fail the run (``_e2e_checks.py``), the idle
proof's CPU-time reading (``_gpu_idle.py``, against real idle and busy processes),
and the benchmark's whole flow with a fake ``EngineProbe`` answering scripted
figures: a null test that tells two stocks apart, engines whose arguments differ and
a run without stock's default backend all end with exit status 1 and say why; a
steady faster template gets "faster", a noisy one "undecided".
"""

from __future__ import annotations

import functools
import json
import statistics
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

# --- quad ratios, intervals, verdicts ---------------------------------------------------


def test_a_quad_cancels_a_linear_drift() -> None:
    # the same engine twice while the machine slows by 10 % a unit: ABBA reads ~1
    drifting = [1.0, 1.1, 1.2, 1.3]
    assert stats.quad_ratio("step_ms_b1", "ABBA", drifting) == pytest.approx(1.0, abs=0.01)
    assert stats.quad_ratio("step_ms_b1", "BAAB", drifting) == pytest.approx(1.0, abs=0.01)
    # B twice as slow: 2 whatever the order
    assert stats.quad_ratio("step_ms_b1", "ABBA", [1.0, 2.0, 2.0, 1.0]) == pytest.approx(2.0)
    assert stats.quad_ratio("step_ms_b1", "BAAB", [2.0, 1.0, 1.0, 2.0]) == pytest.approx(2.0)


def test_a_rate_is_inverted_so_every_ratio_is_time_over_stocks_time() -> None:
    # B prefills twice as fast: half stock's time
    assert stats.quad_ratio("prefill_tok_s", "ABBA", [100, 200, 200, 100]) == pytest.approx(0.5)


def test_a_quad_is_four_units_in_one_of_two_orders() -> None:
    with pytest.raises(ValueError, match="ABBA or BAAB"):
        stats.quad_ratio("step_ms_b1", "ABAB", [1, 1, 1, 1])
    with pytest.raises(ValueError):
        stats.quad_ratio("step_ms_b1", "ABBA", [1, 1, 1])


def test_the_interval_is_reproducible_and_holds_the_median() -> None:
    values = [0.9, 0.95, 1.0, 1.02, 0.97, 0.93, 1.05, 0.99, 0.96, 1.01]
    lo, hi = stats.bootstrap_median_interval(values)
    assert (lo, hi) == stats.bootstrap_median_interval(values)
    assert lo <= statistics.median(values) <= hi
    assert min(values) <= lo < hi <= max(values)
    tight = stats.bootstrap_median_interval([v * 0.1 + 0.9 for v in values])
    assert tight[1] - tight[0] < hi - lo


def test_verdicts_read_the_interval_at_the_margin() -> None:
    assert stats.verdict((0.85, 0.94), 0.05) == "faster"
    assert stats.verdict((1.06, 1.2), 0.05) == "slower"
    assert stats.verdict((0.97, 1.03), 0.05) == "same"
    assert stats.verdict((0.9, 1.01), 0.05) == "undecided"
    assert stats.verdict((0.85, 0.96), 0.05) == "undecided"  # faster, but not by the margin


def test_compare_keeps_every_quad() -> None:
    quads = [0.8, 0.82, 0.79, 0.81, 0.8, 0.83, 0.78, 0.8]
    row = stats.compare(quads, 0.05)
    assert row["quads"] == quads and row["verdict"] == "faster"
    assert row["width"] == pytest.approx(row["interval"][1] - row["interval"][0])


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


def _null_row(quads: list[float]) -> dict:
    return {"median": statistics.median(quads), "quads": quads}


def test_a_null_test_whose_interval_misses_one_fails() -> None:
    null = {
        "step_ms_b1": _null_row([0.97, 0.99, 1.0, 1.01, 1.01, 1.02, 1.03, 1.04]),
        "step_ms_b8": _null_row([1.04, 1.05, 1.07, 1.08, 1.08, 1.09, 1.11, 1.12]),
    }
    (problem,) = checks.null_problems(null)
    assert "step_ms_b8" in problem and "identical engines" in problem
    assert "97.50% interval" in problem  # two metrics, one family


def test_the_null_test_is_one_family_not_four_chances_to_fail() -> None:
    # a metric whose 95 % interval just misses 1 (one run in twenty for each of four
    # metrics of two identical engines) is within the family-wise interval
    near = [0.99, 1.01, 1.02, 1.03, 1.03, 1.04, 1.05, 1.06]
    assert not stats.bootstrap_median_interval(near)[0] <= 1.0
    steady = [0.98, 0.99, 1.0, 1.0, 1.0, 1.01, 1.01, 1.02]
    null = {"b1": _null_row(near), "b8": _null_row(steady), "b64": _null_row(steady),
            "prefill": _null_row(steady)}  # fmt: skip
    assert checks.null_problems(null) == []


def test_a_unit_where_another_engine_used_cpu_is_named() -> None:
    units = [
        {"engine": "a", "quad": 0, "pair": "b", "wall_s": 2.0, "others_cpu_s": {"b": 0.01}},
        {"engine": "b", "quad": 0, "pair": "b", "wall_s": 2.0, "others_cpu_s": {"a": 0.5}},
    ]
    (problem,) = checks.busy_units(units)
    assert "a used 0.500 s of CPU" in problem


def test_goals_are_verdicts_and_unmet_without_stocks_default_backend() -> None:
    ratios = {
        "step_ms_b1": {"median": 0.8, "interval": [0.75, 0.85]},
        "step_ms_b8": {"median": 0.95, "interval": [0.9, 0.97]},  # faster, not by 5 %
        "prefill_tok_s": {"median": 1.02, "interval": [1.0, 1.04]},  # not slower
    }
    rows = checks.goals("1.1b", ratios, {}, stock_ran=False)
    assert rows and all(r["status"].startswith("unmet") for r in rows)
    status = {r["goal"].split(" ")[1]: r["status"] for r in checks.goals("1.1b", ratios, {}, True)}
    assert status == {"1": "met", "8": "missed", "64": "unmet: not measured", "prefill": "met"}
    assert checks.goal_met("not slower", [0.9, 1.05]) and not checks.goal_met("faster", [0.9, 0.96])


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
    assert checks.busy_units([window.record | {"quad": 0, "pair": "b"}]) == []


def test_a_busy_engine_is_caught(spinner) -> None:
    with idle.Window("a", "round", 0, {"b": spinner.pid}, settle_max_s=0.5) as window:
        time.sleep(1.0)
    assert window.record["settle_s"] == 0.5  # it never settled: waited the most, then measured
    assert window.record["others_cpu_s"]["b"] > 0.3
    assert checks.busy_units([window.record | {"quad": 0, "pair": "b"}])


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
        assert checks.busy_units([window.record | {"quad": 0, "pair": "b"}]) == []
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
    """Answers like ``_engine_probe.py``: a unit's seconds are ``base step x factor``,
    ``factor = FakeProbe.script["factor"](probe, unit_count)``."""

    script: Any = None
    made: list[str] = []

    def __init__(self, spec: dict[str, Any], cache_root: str | None = None, wait: bool = True):
        variant = spec["variant"]
        self.variant, self.cache_root = variant, cache_root or f"/cache/{variant}"
        self.instance = FakeProbe.made.count(variant)
        FakeProbe.made.append(variant)
        self.units = 0
        self._sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        kwargs = {k: v for k, v in spec.items() if k not in ("variant", "env", "cpus")}
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
        if command["op"] == "warm":
            return {"warmed": command["batches"]}
        if command["op"] == "gpu_step":
            return {"span_ms_per_step": 1.0, "kernel_ms_per_step": 0.8}
        assert command["op"] == "unit"
        self.units += 1
        factor = FakeProbe.script["factor"](self, self.units)
        out: dict[str, Any] = {"begin": 0.0, "end": 1.0}
        steps = command["long"] - command["short"]
        for b in command["batches"]:
            step_s = BASE[self.variant] * (1 + b / 100) * factor / 1000
            out[f"b{b}"] = {"short_s": 0.01, "long_s": 0.01 + step_s * steps}
        out["prefill_s"] = 0.02 * factor
        return out

    def quit(self) -> None:
        self._sleep.terminate()

    def close(self) -> None:
        self._sleep.kill()
        self._sleep.wait()


BASE = {"gpu-stock": 2.0, "gpu-stock-triton": 2.2, "gpu-template": 1.6, "gpu-template-fused": 1.5}


def _steady(probe: FakeProbe, unit: int) -> float:
    return 1.0 + 0.002 * (unit % 3)  # a little noise, the same for every engine


def _run(monkeypatch, tmp_path, factor=_steady, kwargs=None, argv=()) -> tuple[int, dict]:
    FakeProbe.script = {"factor": factor, "kwargs": kwargs or {}}
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
    rc = gpu_e2e.main(["--quads", "8", "--json", str(out), *argv])
    return rc, json.loads(out.read_text())


def test_a_steady_faster_template_is_faster_and_the_null_test_passes(
    monkeypatch, tmp_path, capsys
) -> None:
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 0, result["self_check"]
    comparisons = result["summary"]["comparisons"]
    b1 = comparisons["gpu-template"]["step_ms_b1"]
    assert b1["median"] == pytest.approx(0.8, rel=0.01) and b1["verdict"] == "faster"
    assert len(b1["quads"]) == 8  # every quad, none dropped
    assert comparisons["stock'"]["step_ms_b1"]["verdict"] == "same"
    assert FakeProbe.made.count("gpu-stock") == 2  # stock and stock'
    # 2 comparisons x 8 quads x 4 units, each unit's order and timestamps kept
    assert len(result["units"]) == 64
    # ABBA then BAAB per comparison: no quad starts with the engine that ran last
    engines = [u["engine"] for u in result["units"]]
    assert engines[:8] == [
        "stock",
        "stock'",
        "stock'",
        "stock",
        "stock'",
        "stock",
        "stock",
        "stock'",
    ]
    assert all(engines[i] != engines[i - 1] for i in range(4, len(engines), 4))
    assert {g["status"] for g in result["goals"]["gpu-template"]} == {"met"}
    assert "gpu" in result and "self-check passed" in capsys.readouterr().out


def test_a_null_test_that_tells_two_stocks_apart_fails_loudly(monkeypatch, tmp_path, capsys):
    def factor(probe: FakeProbe, unit: int) -> float:
        # the second stock engine runs 10 % slower: the harness sees a difference that
        # cannot be the platform's
        return _steady(probe, unit) * (
            1.1 if probe.variant == "gpu-stock" and probe.instance else 1
        )

    rc, result = _run(monkeypatch, tmp_path, factor)
    assert rc == 1
    assert any("null test step_ms_b1" in p for p in result["self_check"]["problems"])
    assert "SELF-CHECK FAILED" in capsys.readouterr().err


def test_a_noisy_template_is_undecided_not_faster(monkeypatch, tmp_path) -> None:
    def factor(probe: FakeProbe, unit: int) -> float:
        if probe.variant == "gpu-template":
            return 1.25 * (0.7 if (unit - 1) // 2 % 2 else 1.3)  # quad by quad 0.7x or 1.3x
        return _steady(probe, unit)

    rc, result = _run(monkeypatch, tmp_path, factor)
    row = result["summary"]["comparisons"]["gpu-template"]["step_ms_b1"]
    assert row["verdict"] == "undecided", row
    assert rc == 0  # an undecided verdict is a finding, not a broken harness


def test_engines_with_different_arguments_are_not_measured(monkeypatch, tmp_path) -> None:
    rc, result = _run(monkeypatch, tmp_path, kwargs={"gpu-template": {"dtype": "float32"}})
    assert rc == 1
    assert any("dtype" in p for p in result["self_check"]["problems"])
    assert result["units"] == [] and "summary" not in result


def test_an_environment_that_differs_is_measured_but_fails(monkeypatch, tmp_path) -> None:
    real_init = FakeProbe.__init__

    def init(self, spec, cache_root=None, wait=True):
        real_init(self, spec, cache_root, wait)
        if self.variant == "gpu-template":
            self.init["env"] = {"VLLM_USE_V2_MODEL_RUNNER": "0"}

    monkeypatch.setattr(FakeProbe, "__init__", init)
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 1 and len(result["units"]) == 64
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
    assert all(g["status"].startswith("unmet") for g in result["goals"]["gpu-template"])


def test_fewer_than_eight_quads_are_refused(monkeypatch, tmp_path) -> None:
    with pytest.raises(SystemExit):
        _run(monkeypatch, tmp_path, argv=["--quads", "4"])

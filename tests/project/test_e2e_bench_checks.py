"""``benchmarks/gpu_e2e.py``'s arithmetic and checks, on the CPU with made-up probe results.

No GPU and no engine: the quad and pair ratios, t intervals and verdicts
(``_e2e_stats.py``) with the intervals' coverage measured on simulated null runs,
the plan that takes positions from the engines (``_e2e_design.py``), the checks
that fail the run (``_e2e_checks.py``), the idle proof's CPU-time reading and the
pinning of live processes (``_gpu_idle.py``, against real idle and busy
processes), and the benchmark's whole flow with a fake ``EngineProbe`` answering
scripted figures: a null test that tells two stocks apart, engines whose arguments
or environments differ without a reason, a deadline too short and a run without
stock's default backend all end with exit status 1 and say why; a steady faster
template gets "faster", a noisy one "undecided".
"""

from __future__ import annotations

import functools
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _e2e_checks as checks
import _e2e_design as design
import _e2e_stats as stats
import _gpu_idle as idle
import gpu_e2e

# --- quad and pair ratios, intervals, verdicts ------------------------------------------


def test_a_quad_cancels_a_linear_drift() -> None:
    # the same engine twice while the machine slows by 10 % a unit: ABBA reads ~1
    drifting = [1.0, 1.1, 1.2, 1.3]
    assert stats.quad_ratio("step_ms_b1", "ABBA", drifting) == pytest.approx(1.0, abs=0.01)
    assert stats.quad_ratio("step_ms_b1", "BAAB", drifting) == pytest.approx(1.0, abs=0.01)
    # B twice as slow: 2 whatever the order
    assert stats.quad_ratio("step_ms_b1", "ABBA", [1.0, 2.0, 2.0, 1.0]) == pytest.approx(2.0)
    assert stats.quad_ratio("step_ms_b1", "BAAB", [2.0, 1.0, 1.0, 2.0]) == pytest.approx(2.0)


def test_a_pair_cancels_the_carry_over_a_quad_keeps() -> None:
    # identical engines; the unit that follows its own engine runs 3 % faster
    fast = 0.97
    abba = stats.quad_ratio("step_ms_b1", "ABBA", [1.0, 1.0, fast, 1.0])  # B's second unit
    baab = stats.quad_ratio("step_ms_b1", "BAAB", [1.0, 1.0, fast, 1.0])  # A's second unit
    assert abba < 0.99 and baab > 1.01
    assert stats.pair_ratios([abba, baab]) == [pytest.approx(1.0)]
    assert stats.pair_ratios([0.9, 1.1, 1.2]) == [pytest.approx(math.sqrt(0.99))]  # no partner


def test_a_rate_is_inverted_so_every_ratio_is_time_over_stocks_time() -> None:
    # B prefills twice as fast: half stock's time
    assert stats.quad_ratio("prefill_tok_s", "ABBA", [100, 200, 200, 100]) == pytest.approx(0.5)


def test_a_quad_is_four_units_in_one_of_two_orders() -> None:
    with pytest.raises(ValueError, match="ABBA or BAAB"):
        stats.quad_ratio("step_ms_b1", "ABAB", [1, 1, 1, 1])
    with pytest.raises(ValueError):
        stats.quad_ratio("step_ms_b1", "ABBA", [1, 1, 1])


@pytest.mark.parametrize(
    ("level", "df", "t"),
    [(0.95, 1, 12.7062), (0.95, 3, 3.18245), (0.95, 4, 2.77645), (0.95, 7, 2.36462),
     (0.95, 30, 2.04227), (0.9875, 3, 5.39195), (0.99, 3, 5.84091), (0.99, 10, 3.16927)],
)  # fmt: skip
def test_the_t_quantile_matches_the_tables(level: float, df: int, t: float) -> None:
    assert stats.t_quantile(level, df) == pytest.approx(t, abs=2e-4)


def test_the_t_interval_is_the_geometric_mean_plus_minus_t_standard_errors() -> None:
    pairs = [0.9, 0.95, 1.0, 1.02]
    lo, hi = stats.t_interval(pairs)
    logs = [math.log(p) for p in pairs]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    assert math.log(hi) - mean == pytest.approx(3.18245 * sd / 2, rel=1e-4)
    assert math.log(lo) == pytest.approx(2 * mean - math.log(hi))
    with pytest.raises(ValueError, match="two pairs"):
        stats.t_interval([1.0])


def test_verdicts_read_the_interval_at_the_margin() -> None:
    assert stats.verdict((0.85, 0.94), 0.05) == "faster"
    assert stats.verdict((1.06, 1.2), 0.05) == "slower"
    assert stats.verdict((0.97, 1.03), 0.05) == "same"
    assert stats.verdict((0.9, 1.01), 0.05) == "undecided"
    assert stats.verdict((0.85, 0.96), 0.05) == "undecided"  # faster, but not by the margin


def test_compare_keeps_every_quad_and_reads_pairs() -> None:
    quads = [0.8, 0.82, 0.79, 0.81, 0.8, 0.83, 0.78, 0.8]
    row = stats.compare(quads, 0.05)
    assert row["quads"] == quads and len(row["pairs"]) == 4 and row["verdict"] == "faster"
    assert row["ratio"] == pytest.approx(stats.geometric_mean(quads))
    assert row["width"] == pytest.approx(row["interval"][1] - row["interval"][0])


@pytest.mark.parametrize("model", stats.NOISE_MODELS, ids=lambda m: m.name.split(" (")[0])
def test_the_interval_covers_about_95_percent_at_the_default_quads(model) -> None:
    # The claim the report prints, measured: null runs of two identical engines at the
    # default quad count, the harness's exact interval procedure. 4000 runs: a binomial
    # standard error of 0.35 %; the bounds are about four of them.
    pairs = gpu_e2e.DEFAULT_QUADS // 2
    assert 0.935 <= stats.coverage(model, pairs, runs=4000) <= 0.965
    # the null test's family of four metrics, each at 1 - 0.05/4
    assert 0.935 <= stats.coverage(model, pairs, runs=1500, metrics=4) <= 0.97


def test_the_coverage_simulation_sees_an_interval_that_is_too_narrow() -> None:
    # the same simulation, fed a 50 % interval labelled 95 %, reports it
    def narrow(quads, level):
        return stats.t_on_pairs(quads, 0.5)

    model = stats.NOISE_MODELS[0]
    assert stats.coverage(model, 4, runs=1000, interval=narrow) < 0.6


def test_a_range_of_n_rounds_holds_the_median_with_a_known_chance() -> None:
    assert stats.range_coverage(3) == pytest.approx(0.75)
    assert stats.range_coverage(4) == pytest.approx(0.875)


# --- the plan ---------------------------------------------------------------------------


def test_the_layout_gives_units_one_set_of_cores_and_the_start_equal_sets() -> None:
    engines = ["stock", "stock'", "gpu-template"]
    layout = design.core_layout(engines, list(range(16)), random.Random(1))
    assert layout is not None and layout.harness == [0]
    assert layout.measure == list(range(1, 8)) and layout.park == list(range(8, 16))
    sets = list(layout.start.values())
    assert sorted(layout.start) == sorted(engines) and {len(s) for s in sets} == {5}
    assert sorted(c for s in sets for c in s) == list(range(1, 16))
    assert design.core_layout(engines, [0, 1], random.Random(1)) is None  # too few cores
    # the seed decides which engine starts on which set
    starts = {tuple(design.core_layout(engines, range(16), random.Random(s)).start["stock"])
              for s in range(20)}  # fmt: skip
    assert len(starts) == 3


def test_no_quad_starts_with_the_engine_that_just_ran_and_pairs_balance() -> None:
    rng = random.Random(5)
    last: str | None = "gpu-template"
    orientations = set()
    for r in range(50):
        plan = design.round_plan(["stock'", "gpu-template"], r, last, "stock", rng)
        assert sorted(q.comparison for q in plan) == ["gpu-template"] * 2 + ["stock'"] * 2
        for first, second in zip(plan[::2], plan[1::2], strict=True):
            assert first.comparison == second.comparison
            assert {first.order, second.order} == {"ABBA", "BAAB"}
            assert (first.index, second.index) == (2 * r, 2 * r + 1)
            orientations.add(first.order)
        for quad in plan:
            engines = quad.engines("stock")
            assert engines[0] != last
            last = engines[-1]
    assert orientations == {"ABBA", "BAAB"}  # both orientations are drawn


def test_the_device_order_rotates_each_round() -> None:
    engines = ["stock", "gpu-template", "gpu-template-fused"]
    orders = [design.device_order(engines, r, 3) for r in range(3)]
    assert [o[0] for o in orders] == orders[0]  # each engine first once in three rounds
    assert design.device_order(engines, 0, 3) == design.device_order(engines, 3, 3)


# --- the checks -------------------------------------------------------------------------


def _engine(**kwargs: Any) -> dict[str, Any]:
    base = {"model": "/m", "dtype": "bfloat16", "max_num_batched_tokens": 8192, "seed": 0}
    env = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    return {"kwargs": base | kwargs, "env": env, "env_changed": {}}


def test_engines_that_differ_only_in_the_platform_pass_with_their_reasons() -> None:
    engines = {
        "gpu-stock": _engine(),
        "gpu-stock-triton": _engine(attention_backend="TRITON_ATTN"),
        "gpu-template-fused": _engine(additional_config={"template": {"model_impl": "fused"}}),
    }
    engines["gpu-stock"]["env"]["VLLM_PLUGINS"] = "none"
    engines["gpu-template-fused"]["env"]["VLLM_TEMPLATE_DEVICE"] = "cuda"
    engines["gpu-template-fused"]["env_changed"]["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
    rows = checks.differences(engines)
    assert checks.difference_problems(rows) == []
    shown = {(r["part"], r["key"]) for r in rows}
    assert ("env built", "VLLM_WORKER_MULTIPROC_METHOD") in shown  # set while building
    assert ("kwargs", "attention_backend") in shown and all(r["reason"] for r in rows)
    spawn = next(r for r in rows if r["key"] == "VLLM_WORKER_MULTIPROC_METHOD")
    assert spawn["values"]["gpu-stock"] == "<absent>" and "_choose_start_method" in spawn["reason"]


def test_every_allowed_difference_says_why() -> None:
    for table in (checks.ALLOWED_ARGUMENTS, checks.ALLOWED_ENV):
        assert all(len(reason) > 40 for reason in table.values())


def test_a_dtype_that_differs_is_named() -> None:
    # the first harness's fault: stock's dtype followed a CPU rule and fell to float32
    engines = {"gpu-stock": _engine(dtype="float32"), "gpu-template": _engine()}
    (problem,) = checks.difference_problems(checks.differences(engines))
    assert "dtype" in problem and "float32" in problem and "bfloat16" in problem


def test_an_argument_or_variable_one_engine_lacks_is_named() -> None:
    engines = {"gpu-stock": _engine(), "gpu-template": _engine(max_num_seqs=64)}
    engines["gpu-template"]["env"]["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    engines["gpu-template"]["env_changed"]["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    problems = checks.difference_problems(checks.differences(engines))
    assert any("max_num_seqs" in p and "<absent>" in p for p in problems)
    assert any("VLLM_USE_V2_MODEL_RUNNER" in p for p in problems)
    assert any("env built" in p and "VLLM_ENABLE_V1_MULTIPROCESSING" in p for p in problems)


def test_the_null_tests_engines_may_not_differ_even_where_others_may() -> None:
    engines = {"stock": _engine(), "stock'": _engine()}
    engines["stock'"]["env_changed"]["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
    (problem,) = checks.difference_problems(checks.differences(engines))
    assert "between stock and stock'" in problem


def _null_row(quads: list[float]) -> dict:
    return stats.compare(quads, 0.05)


def test_a_null_test_whose_interval_misses_one_fails() -> None:
    null = {
        "step_ms_b1": _null_row([0.97, 0.99, 1.0, 1.01, 1.01, 1.02, 1.03, 1.0]),
        "step_ms_b8": _null_row([1.04, 1.05, 1.07, 1.08, 1.08, 1.09, 1.11, 1.12]),
    }
    (problem,) = checks.null_problems(null)
    assert "step_ms_b8" in problem and "identical engines" in problem
    assert "97.50% interval" in problem and "4 pairs" in problem  # two metrics, one family


def test_the_null_test_is_one_family_not_four_chances_to_fail() -> None:
    # a metric whose 95 % interval just misses 1 is within the family-wise interval
    near = [1.0, 1.04, 1.01, 1.05, 1.02, 1.06, 1.0, 1.03]
    assert not stats.t_interval(stats.pair_ratios(near))[0] <= 1.0
    steady = [0.98, 0.99, 1.0, 1.0, 1.0, 1.01, 1.01, 1.02]
    null = {"b1": _null_row(near), "b8": _null_row(steady), "b64": _null_row(steady),
            "prefill": _null_row(steady)}  # fmt: skip
    assert checks.null_problems(null) == []


def test_a_unit_where_another_engine_used_cpu_is_named() -> None:
    units = [
        {"engine": "a", "quad": 0, "comparison": "b", "wall_s": 2.0, "others_cpu_s": {"b": 0.01}},
        {"engine": "b", "quad": 0, "comparison": "b", "wall_s": 2.0, "others_cpu_s": {"a": 0.5}},
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
    assert checks.busy_units([window.record | {"quad": 0, "comparison": "b"}]) == []


def test_a_busy_engine_is_caught(spinner) -> None:
    with idle.Window("a", "round", 0, {"b": spinner.pid}, settle_max_s=0.5) as window:
        time.sleep(1.0)
    assert window.record["settle_s"] == 0.5  # it never settled: waited the most, then measured
    assert window.record["others_cpu_s"]["b"] > 0.3
    assert checks.busy_units([window.record | {"quad": 0, "comparison": "b"}])


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
        assert checks.busy_units([window.record | {"quad": 0, "comparison": "b"}]) == []
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


def _cores_of(pid: int) -> set[str]:
    """Each thread's ``Cpus_allowed_list`` as the kernel reports it."""
    out = set()
    for tid in idle.threads(pid):
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        out |= {
            line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list")
        }
    return out


def test_a_live_process_tree_moves_to_its_cores_with_every_thread() -> None:
    cores = sorted(idle.os.sched_getaffinity(0))
    # a parent with three sleeping threads, and a child: the tree of a probe and its engine
    code = (
        "import subprocess, sys, threading, time\n"
        "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(3)]\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "time.sleep(30)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(50):
            tree = idle.process_tree(parent.pid)
            if len(tree) == 2 and len(idle.threads(parent.pid)) >= 4:
                break
            time.sleep(0.1)
        moved = idle.pin_tree(parent.pid, cores[-1:])
        assert moved["unpinned"] == [] and moved["threads"] >= 5
        assert all(_cores_of(pid) == {str(cores[-1])} for pid in idle.process_tree(parent.pid))
        assert idle.pin_tree(parent.pid, cores)["unpinned"] == []
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
            "env_changed": {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
            if variant.startswith("gpu-template")
            else {},
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
            assert command["warm"] is False  # the units ran every shape before
            span = BASE[self.variant] / 2
            return {"span_ms_per_step": span, "kernel_ms_per_step": 0.8 * span}
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
    # the coverage the report prints, on fewer simulated runs (its own tests use thousands)
    monkeypatch.setattr(gpu_e2e, "coverage_table", functools.partial(stats.coverage_table, runs=50))
    monkeypatch.setattr(
        gpu_e2e,
        "device_rates",
        lambda: {"copy_bytes_per_s": 3e12, "gemm_flops": 7e14, "device": "fake"},
    )
    out = tmp_path / "e2e.json"
    rc = gpu_e2e.main(["--quads", "8", "--json", str(out), *argv])
    return rc, json.loads(out.read_text())


def _placement_check(units: list[dict[str, Any]]) -> None:
    """No quad starts with the engine that ran last; per comparison, pairs ABBA+BAAB in
    which each engine holds each position once."""
    for i in range(4, len(units), 4):
        assert units[i]["engine"] != units[i - 1]["engine"]
    quads: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for u in units:
        quads.setdefault((u["comparison"], u["quad"]), []).append(u)
    for (comparison, index), rows in quads.items():
        assert [r["position"] for r in rows] == [0, 1, 2, 3]
        if index % 2 == 0:
            partner = quads[(comparison, index + 1)]
            assert {rows[0]["order"], partner[0]["order"]} == {"ABBA", "BAAB"}
            for position in range(4):
                assert {rows[position]["engine"], partner[position]["engine"]} == {
                    "stock",
                    comparison,
                }


def test_a_steady_faster_template_is_faster_and_the_null_test_passes(
    monkeypatch, tmp_path, capsys
) -> None:
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 0, result["self_check"]
    comparisons = result["summary"]["comparisons"]
    b1 = comparisons["gpu-template"]["step_ms_b1"]
    assert b1["ratio"] == pytest.approx(0.8, rel=0.01) and b1["verdict"] == "faster"
    assert len(b1["quads"]) == 8 and len(b1["pairs"]) == 4  # every quad, none dropped
    assert comparisons["stock'"]["step_ms_b1"]["verdict"] == "same"
    assert FakeProbe.made.count("gpu-stock") == 2  # stock and stock'
    # 2 comparisons x 8 quads x 4 units, each unit's place in the plan and timestamps kept
    assert len(result["units"]) == 64
    _placement_check(result["units"])
    assert {g["status"] for g in result["goals"]["gpu-template"]} == {"met"}
    # the device rounds: stock and the template, every batch, each round
    gpu = result["gpu"]
    assert gpu["rounds_run"] == 3 and len(gpu["records"]) == 3 * 2 * 3
    ratio = gpu["summary"]["ratios"]["gpu-template"]["b1"]["span_ms_per_step"]
    assert ratio["median"] == pytest.approx(0.8) and len(ratio["values"]) == 3
    # the measured coverage, the allowed difference and its reason are in the report
    assert {row["pairs"] for row in result["coverage"]} == {4}
    out = capsys.readouterr().out
    assert "simulated null runs of 4 pairs" in out and "self-check passed" in out
    assert "VLLM_WORKER_MULTIPROC_METHOD" in out and "_choose_start_method" in out
    assert f"seed {result['seed']}" in out and "(the range of 3 rounds" in out


def test_the_seed_decides_the_plan_and_is_recorded(monkeypatch, tmp_path) -> None:
    def plan(seed: int) -> list[tuple[str, str, int]]:
        _, result = _run(monkeypatch, tmp_path, argv=["--seed", str(seed), "--no-gpu-pass"])
        assert result["seed"] == seed
        return [(u["engine"], u["comparison"], u["quad"]) for u in result["units"]]

    first = plan(11)
    assert plan(11) == first
    assert any(plan(s) != first for s in (12, 13, 14))


def test_each_unit_runs_on_the_measurement_cores_the_others_parked(monkeypatch, tmp_path):
    moves: list[tuple[int, tuple[int, ...]]] = []

    def pin_tree(pid: int, cpus) -> dict[str, Any]:
        moves.append((pid, tuple(cpus)))
        return {"threads": 1, "unpinned": []}

    specs: dict[int, dict[str, Any]] = {}
    real_init = FakeProbe.__init__

    def init(self, spec, cache_root=None, wait=True):
        real_init(self, spec, cache_root, wait)
        specs[self.pid] = spec

    monkeypatch.setattr(FakeProbe, "__init__", init)
    monkeypatch.setattr(gpu_e2e, "available_cores", lambda: list(range(16)))
    monkeypatch.setattr(gpu_e2e, "pin_tree", pin_tree)
    rc, result = _run(monkeypatch, tmp_path, argv=["--no-gpu-pass"])
    assert rc == 0, result["self_check"]
    cores = result["cores"]
    assert cores["measure"] == list(range(1, 8)) and cores["park"] == list(range(8, 16))
    assert sorted(tuple(s["cpus"]) for s in specs.values()) == sorted(
        tuple(c) for c in cores["start"].values()
    )
    # warm-up and 64 units: each moves three engines, the measured one onto the unit cores
    assert len(moves) == 3 * (3 + 64)
    measured = [pid for pid, cpus in moves if cpus == tuple(range(1, 8))]
    assert len(measured) == 3 + 64
    assert all(u["cores"] == list(range(1, 8)) and u["unpinned"] == [] for u in result["units"])


def test_an_engine_that_cannot_be_moved_fails_the_run(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(gpu_e2e, "available_cores", lambda: list(range(16)))
    monkeypatch.setattr(
        gpu_e2e, "pin_tree", lambda pid, cpus: {"threads": 0, "unpinned": ["1/1: EPERM"]}
    )
    rc, result = _run(monkeypatch, tmp_path, argv=["--no-gpu-pass"])
    assert rc == 1
    assert any("not on their cores" in p for p in result["self_check"]["problems"])


def test_a_deadline_too_short_runs_fewer_quads_and_fails(monkeypatch, tmp_path) -> None:
    # 60 s left at the start: less than the device pass's and the closing reserves
    rc, result = _run(monkeypatch, tmp_path, argv=["--deadline-s", "60"])
    assert rc == 1 and result["quads_run"] == 0 and "summary" not in result
    assert any("0 of 8 quads ran" in p for p in result["self_check"]["problems"])


def test_the_device_pass_stops_at_the_deadline_and_says_so(monkeypatch, tmp_path) -> None:
    # a clock that only the device measurements move, 20 s each: 120 s a device round
    clock = {"now": 0.0}
    real_ask = FakeProbe.ask

    def ask(self, **command: Any) -> dict[str, Any]:
        if command["op"] == "gpu_step":
            clock["now"] += 20.0
        return real_ask(self, **command)

    real = gpu_e2e.Deadline

    def deadline(seconds: float) -> gpu_e2e.Deadline:
        d = real(seconds, clock=lambda: clock["now"])
        d.end = 200.0  # the quads fit; two device rounds start, the third does not
        return d

    monkeypatch.setattr(FakeProbe, "ask", ask)
    monkeypatch.setattr(gpu_e2e, "Deadline", deadline)
    rc, result = _run(monkeypatch, tmp_path)
    assert rc == 1 and result["quads_run"] == 8
    assert result["gpu"]["rounds_run"] == 2
    assert "2 of 3 device rounds ran (time)" in result["self_check"]["problems"]


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
            return 1.25 * (0.7 if (unit - 1) // 4 % 2 else 1.3)  # pair by pair 0.7x or 1.3x
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

"""The template compiler end to end: both stages, warm starts, failure fallback."""

from __future__ import annotations

import pytest
from fault_runner import run_with_fault

pytestmark = pytest.mark.e2e


def test_fusion_only_matches_stock(engine_runs, fusion_only_run) -> None:
    stock = engine_runs.run("--stock")
    ours = fusion_only_run
    assert ours["compile"]["stage"] == "fusion_only"
    assert ours["tokens"] == stock["tokens"]
    # The SiLU-and-multiply of both layers fused; IR ops lowered to the CPU kernels.
    assert ours["compile"]["fusion_matches"]["SiluAndMulFusionPass"] == 2
    assert set(ours["compile"]["lowering"]["fused_add_rms_norm"]) == {"template_cpu"}


def test_compiler_called_once_per_piece_and_range(fusion_only, fusion_only_run) -> None:
    ours = fusion_only_run
    compiled = ours["compile"]["compiled"]
    assert len(compiled) == len(set(compiled)) == 3  # 2 layers -> 3 pieces, 1 range
    sized = fusion_only("--engine-args", '{"compilation_config": {"compile_sizes": [4]}}')
    keys = sized["compile"]["compiled"]
    assert len(keys) == len(set(keys)) == 6  # plus the single size 4 for each piece
    assert sum("range_4_4" in k for k in keys) == 3


def test_warm_start_loads_instead_of_compiling(
    fusion_only, fusion_only_run, filled_cache_copy
) -> None:
    """On a copy of the cache the cold run filled: the artifacts load wherever the cache
    lies (the fault tests damage such copies)."""
    cold = fusion_only_run
    warm = fusion_only(cache_root=filled_cache_copy, label="warm")
    assert cold["compile"]["pieces"] == 3
    assert warm["compile"]["pieces"] == 0, "warm start must not call the compiler"
    assert warm["compile"]["cache"]["aot_artifacts_loaded"] >= 1
    assert warm["tokens"] == cold["tokens"]


def test_stages_do_not_share_cache_entries(engine_runs, compile_cache, fusion_only_run) -> None:
    graph = engine_runs.run("--compile-stage", "graph", cache_root=compile_cache)
    assert graph["compile"]["stage"] == "graph"
    assert graph["compile"]["pieces"] == 3, "a graph-stage run must not load fusion-only pieces"
    assert graph["compile"]["cache"]["aot_artifacts_loaded"] == 0


def test_graph_stage_warm_start(engine_runs, compile_cache) -> None:
    cold = engine_runs.run("--compile-stage", "graph", cache_root=compile_cache)
    warm = engine_runs.run("--compile-stage", "graph", cache_root=compile_cache, label="warm")
    assert warm["compile"]["pieces"] == 0
    assert warm["compile"]["cache"]["aot_artifacts_loaded"] >= 1
    assert warm["tokens"] == cold["tokens"]


def test_failing_stage_runs_piece_eagerly(engine_runs, tmp_path) -> None:
    stock = engine_runs.run("--stock")
    report = run_with_fault(engine_runs, "compile_stage", cache_root=tmp_path)
    assert "error" not in report, report.get("traceback")
    assert len(report["compile"]["fallbacks"]) == 3
    causes = report["compile"]["fallback_causes"].values()
    assert len(causes) == 3 and all("injected compile-stage fault" in c for c in causes)
    assert report["tokens"] == stock["tokens"]
    warnings = [
        line for line in report["_stderr"].splitlines() if "stage failed for artifact" in line
    ]
    assert len(warnings) == 3 and "injected compile-stage fault" in warnings[0]

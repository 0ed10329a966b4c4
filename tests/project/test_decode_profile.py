"""``benchmarks/gpu_decode_profile.py``'s arithmetic on the CPU, with made-up profiles: the
kernel families (Inductor's fused RMS norm is a norm), the per-step sums per family and the
candidate-over-stock ratios it reports."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gpu_decode_profile as profile
from _bench_worker import kernel_family


def _answer(kernels: dict[str, tuple[float, float]]) -> dict[str, Any]:
    return {
        "kernel_ms_per_step": sum(ms for ms, _ in kernels.values()),
        "launches_per_step": sum(n for _, n in kernels.values()),
        "kernels": {k: {"ms": ms, "launches": n} for k, (ms, n) in kernels.items()},
    }


def test_inductor_norms_and_named_kernels_fall_in_their_families() -> None:
    assert kernel_family("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0") == "norm"
    assert kernel_family("triton_red_fused_fused_add_rms_norm_2") == "norm"
    assert kernel_family("_paged_decode_combine_kernel") == "attention"
    assert kernel_family("_reshape_and_cache_kernel") == "KV write"
    assert kernel_family("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT") == "GEMM"
    assert kernel_family("triton_poi_fused_mul_silu_slice_1") == "activation"


def test_families_sum_time_and_launches_per_step() -> None:
    fams = profile.families(
        _answer({"nvjet_a": (2.0, 32), "nvjet_b": (1.0, 64), "_rms_norm_kernel": (0.1, 65)})[
            "kernels"
        ]
    )
    assert fams["GEMM"] == {"ms": 3.0, "launches": 96}
    assert fams["norm"] == {"ms": 0.1, "launches": 65}


def test_report_gives_each_candidate_over_stock_by_family(capsys: Any) -> None:
    stock = _answer({"nvjet_a": (4.0, 128), "FlashAttnFwdSm90": (0.4, 32)})
    ours = _answer({"nvjet_a": (4.0, 128), "_paged_decode_kernel": (0.2, 32), "x_norm": (0.1, 1)})
    summary = profile.report({"stock": {1: [stock, stock]}, "gpu-template": {1: [ours, ours]}})
    rows = summary["1"]["gpu-template"]
    assert rows["GEMM"]["ratio"] == 1.0
    assert rows["attention"]["ratio"] == 0.5
    assert rows["norm"]["ratio"] is None  # stock has none: no ratio, not a division by zero
    assert "gpu-template / stock, round by round: 0.977 [0.977-0.977]" in capsys.readouterr().out

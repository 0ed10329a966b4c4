"""``vllm-template bench-ops``: no figure exceeds the memory's copy bandwidth unexplained."""

from __future__ import annotations

import argparse

import pytest

from vllm_platform_template.cli import bench_ops


def test_the_last_level_cache_is_found() -> None:
    llc = bench_ops.last_level_cache_bytes("cpu")
    if llc is None:
        pytest.skip("no CPU cache sizes in sysfs")
    assert 256 << 10 <= llc <= 4 << 30


def test_shares_above_the_copy_are_marked_cache_resident(capsys) -> None:
    parser = argparse.ArgumentParser()
    bench_ops.add_arguments(parser)
    # One decode-sized shape (fits any cache) and one past a 32 MiB cache, one dtype.
    args = parser.parse_args(
        ["--device", "cpu", "--dtypes", "float32", "--shapes", "1x768,2048x4096", "--no-compile"]
    )
    result = bench_ops.run_benchmark(args)
    rows = result["rows"]
    assert {r["tokens"] for r in rows} == {1, 2048}
    llc = result["last_level_cache_bytes"]
    for row in rows:
        # Past the cache a kernel moves bytes at most at the copy's rate; the margin
        # covers timing noise between the two measurements on a shared machine.
        if row["copy_share"] > 1.15:
            assert row["cache_resident"], row
        if llc is not None and row["tokens"] * row["hidden"] * 4 > llc:
            assert not row["cache_resident"], row
        if llc is not None and row["tokens"] == 1:
            assert row["cache_resident"], row  # 1 x 768 floats fit every cache
    bench_ops.print_table(result)
    table = capsys.readouterr().out
    if any(r["cache_resident"] for r in rows):
        assert "last-level cache" in table

"""``vllm-template bench-ops``: shapes that fit the last-level cache are marked as such."""

from __future__ import annotations

import argparse

import pytest

from vllm_platform_template_tools.cli import bench_ops


def test_the_last_level_cache_is_found() -> None:
    llc = bench_ops.last_level_cache_bytes("cpu")
    if llc is None:
        pytest.skip("no CPU cache sizes in sysfs")
    assert 256 << 10 <= llc <= 4 << 30


def test_shapes_that_fit_the_cache_are_marked(capsys) -> None:
    """The marking is a property of the shape (bytes moved vs the last-level cache),
    never of a timing: a share above the copy's on a shared machine can come from a
    copy measured low under load (CI saw 1.15x past the cache), so this checks the
    rule; the figures are for a quiet machine to judge."""
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
    if llc is None:
        assert not any(r["cache_resident"] for r in rows)
        return
    for row in rows:
        fits = row["tokens"] * row["hidden"] * 4 <= llc  # the input alone, a lower bound
        if row["tokens"] == 1:
            assert row["cache_resident"], row  # 1 x 768 floats fit every cache
        if not fits:
            assert not row["cache_resident"], row
    bench_ops.print_table(result)
    table = capsys.readouterr().out
    assert "last-level cache" in table
    marked = [line for line in table.splitlines() if "%*" in line]
    assert len(marked) == sum(r["cache_resident"] for r in rows) > 0

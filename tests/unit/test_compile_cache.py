"""Which compile-cache directories the platform trusts (artifacts there are unpickled)."""

from __future__ import annotations

import os
from pathlib import Path

from vllm_platform_template.platform_plugin.compile_cache import cache_dir_problem


def test_private_dir_is_fine(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    assert cache_dir_problem(cache) is None


def test_missing_dir_is_fine_when_it_can_be_created(tmp_path: Path) -> None:
    assert cache_dir_problem(tmp_path / "not" / "yet") is None


def test_group_or_world_writable_dir_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    problem = cache_dir_problem(cache)
    assert problem is not None and "writable by group or others" in problem


def test_foreign_owner_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    problem = cache_dir_problem(cache, uid=os.geteuid() + 1)
    assert problem is not None and "not by the current user" in problem


def test_path_below_a_file_is_unusable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    problem = cache_dir_problem(blocker / "cache")
    assert problem is not None and "not a directory" in problem

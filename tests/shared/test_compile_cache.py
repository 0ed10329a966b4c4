"""Which compile-cache directories the platform trusts (artifacts there are unpickled)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vllm_platform_template.platform_hooks.compile_cache import (
    cache_dir_problem,
    use_trusted_cache,
)


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


class _Config:
    def __init__(self, cache_dir: str = "") -> None:
        self.cache_dir = cache_dir


def test_untrusted_root_is_replaced_by_a_private_one(tmp_path: Path) -> None:
    (tmp_path / "torch_compile_cache").mkdir()
    (tmp_path / "torch_compile_cache").chmod(0o777)
    environ = {"VLLM_CACHE_ROOT": str(tmp_path)}
    message = use_trusted_cache(_Config(), environ)
    assert message and "writable by group or others" in message
    private = Path(environ["VLLM_CACHE_ROOT"])
    assert private != tmp_path and stat.S_IMODE(private.stat().st_mode) == 0o700


def test_trusted_root_is_kept(tmp_path: Path) -> None:
    environ = {"VLLM_CACHE_ROOT": str(tmp_path)}
    assert use_trusted_cache(_Config(), environ) is None
    assert environ["VLLM_CACHE_ROOT"] == str(tmp_path)


def test_bad_explicit_cache_dir_is_replaced(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    config = _Config(str(blocker / "cache"))
    message = use_trusted_cache(config, {"VLLM_CACHE_ROOT": str(tmp_path)})
    assert message and "not a directory" in message
    assert not config.cache_dir.startswith(str(blocker))


def _key_with_package(monkeypatch, package: Path, stage: str = "graph") -> str:
    from vllm_platform_template.compiler import cache_key

    monkeypatch.setattr(cache_key, "PACKAGE_DIR", package)
    cache_key._sources_digest.cache_clear()
    try:
        return cache_key.compile_cache_key(stage)
    finally:
        cache_key._sources_digest.cache_clear()


def test_the_compile_key_follows_every_module_of_the_package(monkeypatch, tmp_path: Path) -> None:
    """An edit anywhere in the package (here a reference kernel, which a hand-kept list of
    key sources once missed) or another stage gives another key: no stale compiled piece."""
    kernel = tmp_path / "reference_kernels" / "rms_norm.py"
    kernel.parent.mkdir()
    kernel.write_text("def rms_norm(x): return x\n")
    before = _key_with_package(monkeypatch, tmp_path)
    assert _key_with_package(monkeypatch, tmp_path) == before
    assert _key_with_package(monkeypatch, tmp_path, "fusion_only") != before
    kernel.write_text("def rms_norm(x): return 2 * x\n")
    assert _key_with_package(monkeypatch, tmp_path) != before

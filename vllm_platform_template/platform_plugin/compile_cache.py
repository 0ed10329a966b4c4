"""Where compiled artifacts may be loaded from: a trusted, writable compile cache.

vLLM's compile cache (``$VLLM_CACHE_ROOT/torch_compile_cache``) holds pickled
artifacts that are unpickled on the next start, i.e. executed. The platform
loads them only from a directory owned by the current user and not writable by
group or others, and needs it writable to save new ones. Otherwise it logs why
and compiles afresh without any cache for this run (``VLLM_DISABLE_COMPILE_CACHE``
for vLLM's caches, ``force_disable_caches`` for Inductor's), instead of
failing or loading artifacts someone else could have planted.

vLLM hook: ``check_and_update_config`` runs in the front-end process before
the engine and worker processes are started; they inherit the environment.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def cache_dir_problem(path: Path, uid: int | None = None) -> str | None:
    """Why ``path`` must not be used as a compile cache (None if it is fine).

    Checks the directory itself, or its nearest existing ancestor (where it
    would be created): owner, group/other write bits, and that a file can be
    created.
    """
    uid = os.geteuid() if uid is None else uid
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return f"no existing ancestor of {path}"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory, so {path} cannot be created"
    if probe == path:
        info = probe.stat()
        if info.st_uid != uid:
            return f"{path} is owned by uid {info.st_uid}, not by the current user (uid {uid})"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        return f"{probe} is not writable ({e.strerror})"
    return None


def compile_cache_root(cache_root: str) -> Path:
    """vLLM's compile cache directory under ``VLLM_CACHE_ROOT``."""
    return Path(cache_root).expanduser() / "torch_compile_cache"


def disable_compile_caches(inductor_config: dict) -> None:
    """Compile without loading or saving any artifact in this run (all processes)."""
    os.environ["VLLM_DISABLE_COMPILE_CACHE"] = "1"
    inductor_config["force_disable_caches"] = True

"""Where compiled artifacts may be loaded from: a trusted, writable compile cache.

vLLM's compile cache (``$VLLM_CACHE_ROOT/torch_compile_cache``) holds pickled
artifacts that are unpickled on the next start, i.e. executed. The platform
loads them only from a directory owned by the current user and not writable by
group or others, and needs it writable to save new ones. Otherwise it logs why and compiles
afresh into a private temporary cache for this run, instead of failing or
loading artifacts someone else could have planted.

vLLM hook: ``check_and_update_config`` runs in the front-end process before
the engine and worker processes are started; they inherit the environment.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any


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


def private_cache_root() -> str:
    """A fresh directory only this user can read or write (mode 700)."""
    return tempfile.mkdtemp(prefix="vllm-template-cache-")


def use_trusted_cache(
    compilation_config: Any, environ: MutableMapping[str, str] = os.environ
) -> str | None:
    """Point vLLM's compile caches away from an untrusted or unwritable directory.

    vLLM keeps its AOT artifacts under ``$VLLM_CACHE_ROOT/torch_compile_cache``
    and the per-piece cache under ``compilation_config.cache_dir`` when set.
    A bad location is replaced for this run by a fresh private directory:
    nothing is loaded from the bad one, nothing written to it, and the run
    behaves as a cold start. Returns the warning to log, or None.
    """
    problems = []
    if compilation_config.cache_dir:
        problem = cache_dir_problem(Path(compilation_config.cache_dir).expanduser())
        if problem:
            compilation_config.cache_dir = os.path.join(private_cache_root(), "compile")
            problems.append(problem)
    from vllm import envs

    root = environ.get("VLLM_CACHE_ROOT") or envs.VLLM_CACHE_ROOT
    problem = cache_dir_problem(Path(root).expanduser() / "torch_compile_cache")
    if problem:
        environ["VLLM_CACHE_ROOT"] = private_cache_root()
        problems.append(problem)
    if not problems:
        return None
    return (
        f"not using the compile cache: {'; '.join(problems)}. Compiling afresh into a private "
        f"temporary cache ({environ.get('VLLM_CACHE_ROOT')}); nothing is loaded from the "
        "untrusted location. Fix: set VLLM_CACHE_ROOT to a directory you own, mode 700 or 755."
    )

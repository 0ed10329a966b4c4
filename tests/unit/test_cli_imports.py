"""``vllm-template`` starts from a plain clone: a subcommand's module is imported when chosen.

Each check runs the command in a fresh interpreter that refuses every import
outside the standard library and this package (what a machine with only
Python and the clone has), so ``--help``, ``new`` and ``bench-ops --help``
must need neither torch nor vLLM; ``demo --help`` shows the blocker works: it is
refused nothing either, while ``doctor`` (which asks vLLM) is.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "vllm_platform_template"
BLOCKER = textwrap.dedent(
    f"""
    import sys

    class OnlyTheStandardLibrary:
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in sys.stdlib_module_names or top == {PACKAGE!r}:
                return None
            raise ImportError(f"{{name}} is not in the standard library (blocked)")

    sys.meta_path.insert(0, OnlyTheStandardLibrary())
    from {PACKAGE}.cli.main import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _run(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "args", [("--help",), ("new", "--help"), ("bench-ops", "--help"), ("demo", "--help")]
)
def test_help_needs_only_the_standard_library(args: tuple[str, ...]) -> None:
    run = _run(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "usage: vllm-template" in run.stdout


def test_new_writes_a_plugin_with_only_the_standard_library(tmp_path: Path) -> None:
    run = _run("new", "acme", "--device", "npu", "--out", tmp_path / "vllm-acme")
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "vllm-acme" / "vllm_acme" / "devices" / "npu" / "identity.py").is_file()


def test_the_blocker_refuses_what_is_not_the_standard_library() -> None:
    run = _run("doctor")
    assert run.returncode != 0
    assert "is not in the standard library (blocked)" in run.stderr

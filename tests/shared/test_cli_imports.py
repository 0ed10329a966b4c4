"""``vllm-template`` starts from a plain clone: a subcommand's module is imported when chosen.

Each check runs the command in a fresh interpreter that refuses every import
outside the standard library and this package (what a machine with only
Python and the clone has): every subcommand's ``--help`` and ``new`` must need
neither torch nor vLLM, while ``doctor`` (which asks vLLM) is refused.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vllm_platform_template_tools.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("vllm_platform_template", "vllm_platform_template_tools")  # the plugin, its tools
BLOCKER = textwrap.dedent(
    f"""
    import sys

    class OnlyTheStandardLibrary:
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in sys.stdlib_module_names or top in {PACKAGES!r}:
                return None
            raise ImportError(f"{{name}} is not in the standard library (blocked)")

    sys.meta_path.insert(0, OnlyTheStandardLibrary())
    from {PACKAGES[1]}.cli.main import main
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


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_needs_only_the_standard_library(command: str) -> None:
    run = _run(*([command] if command else []), "--help")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"usage: vllm-template {command}".strip() in run.stdout


@pytest.mark.skipif("new" not in COMMANDS, reason="a plugin made by new has no generator")
def test_new_writes_a_plugin_with_only_the_standard_library(tmp_path: Path) -> None:
    run = _run("new", "acme", "--device", "npu", "--out", tmp_path / "vllm-acme")
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "vllm-acme" / "vllm_acme" / "devices" / "npu" / "identity.py").is_file()


def test_the_blocker_refuses_what_is_not_the_standard_library() -> None:
    run = _run("doctor")
    assert run.returncode != 0
    assert "is not in the standard library (blocked)" in run.stderr

"""Every command a README gives in a ``bash`` block is run by a test named here.

This project's README and the first-light plugin's (``scaffold/first_light/README.md``,
the README ``new --device`` writes). A command added to either without a runner, or a
runner renamed or removed, fails here. The full plugin's README (``scaffold/README.md``)
gives the same two tox commands as this project's; its test command is this project's
suite renamed, which CI runs here, not twice.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = ("README.md", "scaffold/first_light/README.md")
DEMO = "python3 -m pip install tox && python3 -m tox -e demo"
TEST = "python3 -m pip install tox && python3 -m tox -e test"
NEW = (
    "python3 -m pip install ruff && python3 -m vllm_platform_template_tools.cli.main "
    "new acme --device npu --out ../vllm-acme"
)
NEW_CI = "cd ../vllm-acme && python3 -m pip install tox && bash .ci/run"
CLEAN_MACHINE = (
    "tests/project/test_clean_machine.py::"
    "test_first_light_plugin_passes_its_readme_on_a_clean_machine"
)
# (README, command) -> the tests that run it, and how.
RUNNERS = {
    ("README.md", DEMO): (
        # `tox -e demo` is `vllm-template demo` in .tox/cpu: the demo itself, human format
        "tests/full_plugin/test_demo_log.py::test_quiet_prints_only_the_text_and_the_report",
        # and the env name reusing .tox/cpu
        "tests/shared/test_tox_shared_env.py::test_every_cpu_env_runs_in_one_shared_virtualenv",
    ),
    ("README.md", TEST): (".ci/run",),  # CI: `python3 -m tox -e test`
    # CI: as my_dev (a name neither torch nor this project has); `tox -e scaffold`: as npu
    ("README.md", NEW): (CLEAN_MACHINE,),
    ("README.md", NEW_CI): (CLEAN_MACHINE,),
    ("scaffold/first_light/README.md", DEMO): (CLEAN_MACHINE,),
    ("scaffold/first_light/README.md", TEST): (CLEAN_MACHINE,),  # its .ci/run runs it
}


def _bash_commands(readme: str) -> list[str]:
    text = (ROOT / readme).read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [ln.split("  #")[0].strip() for block in blocks for ln in block.splitlines() if ln]


def test_every_readme_command_has_a_runner() -> None:
    given = {(readme, command) for readme in READMES for command in _bash_commands(readme)}
    assert given == set(RUNNERS)


@pytest.mark.parametrize(("readme", "command"), list(RUNNERS))
def test_each_runner_exists(readme: str, command: str) -> None:
    for runner in RUNNERS[readme, command]:
        path, _, test = runner.partition("::")
        source = (ROOT / path).read_text()
        assert not test or re.search(rf"^def {test}\(", source, re.MULTILINE), runner
    if RUNNERS[readme, command] == (".ci/run",):
        assert command.split("&& ")[-1] in (ROOT / ".ci/run").read_text()


def test_the_clean_machine_runs_the_commands_the_first_light_readme_gives() -> None:
    """It finds them in the generated README by these words, and runs ``.ci/run``, which
    runs the README's test command."""
    source = (ROOT / "tests/project/test_clean_machine.py").read_text()
    assert "python3 -m pip install tox && python3 -m tox -e (\\w+)" in source
    assert "python3 -m tox -e test" in (ROOT / ".ci/run").read_text()

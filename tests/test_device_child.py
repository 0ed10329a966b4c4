"""Run a script in a child process that has the PrivateUse1 test device.

torch's device backend autoload registers the test device where
``NPU_TEST_DEVICE=1``; the tests that use it run their checks in a child so the
test process keeps torch as it is. The script is a file (spawned ranks import it)
and prints its results as JSON on its last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any


def run_with_test_device(code: str, **env: str) -> Any:
    """Run ``code`` as a script (a file: spawned ranks import it) with the device; its JSON."""
    child = {**os.environ, "NPU_TEST_DEVICE": "1", **env}
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder, "check.py")
        script.write_text(textwrap.dedent(code))
        proc = subprocess.run(
            [sys.executable, str(script)], env=child, capture_output=True, text=True, timeout=240
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def device_env_of(project: Path) -> dict[str, str]:
    """The variables a project's tox sets for its device (``tests/device.env``, which tox
    reads as ``set_env = file|...``): for a first-light plugin, the PrivateUse1 test device
    and the device type it registers as; empty where the file is absent."""
    env_file = project / "tests" / "device.env"
    lines = env_file.read_text().splitlines() if env_file.is_file() else []
    return dict(ln.split("=", 1) for ln in lines if ln.strip() and not ln.startswith("#"))

"""Print the README's size table: this project, ``new acme`` and ``new acme --device npu``.

    python tools/size_table.py

Generates both plugins into a temporary folder with ``vllm-template new`` and
measures them and this project with :func:`vllm_platform_template_tools.cli.new.size_table`
(non-blank lines of code and docs; the embedded model's data files counted as
files only). ``tests/project/test_new.py`` checks that README.md holds this table.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from vllm_platform_template_tools.cli.new import generate, project_root, size_table


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        full = generate("acme", Path(tmp) / "full")
        first_light = generate("acme", Path(tmp) / "first-light", "npu")
        table = size_table(project_root(), full, first_light)
    print(table, end="")


if __name__ == "__main__":
    main()

"""The committed docs/support-matrix.md says what this session's feature tests found.

Runs after ``test_features.py`` and ``test_lora.py`` (pytest runs the files in name
order): every feature those tests decided in this session must have the same CPU cell in
the committed page (``tools/support_matrix.py`` regenerates it). Skipped when the session
ran none of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import feature_matrix
import pytest

pytestmark = pytest.mark.e2e

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import support_matrix  # noqa: E402


def test_the_committed_cpu_column_is_what_the_feature_tests_found(request) -> None:
    results = request.config.stash.get(feature_matrix.RESULTS, None)
    if not results:
        pytest.skip("no feature test ran in this session (test_features.py, test_lora.py)")
    found = {f: c["cell"] for f, c in feature_matrix.cells(results).items()}
    committed = support_matrix.cpu_column(support_matrix.MATRIX.read_text())
    stale = {f: (committed.get(f, "<absent>"), cell) for f, cell in found.items()
             if committed.get(f) != cell}  # fmt: skip
    assert not stale, (
        f"docs/support-matrix.md disagrees with this session (committed, found): {stale}; "
        "regenerate it: SUPPORT_MATRIX_RESULTS=cpu.json pytest -m e2e "
        "tests/full_plugin/test_features.py tests/full_plugin/test_lora.py, "
        "then python tools/support_matrix.py --cpu cpu.json"
    )

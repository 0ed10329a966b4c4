"""The committed docs/support-matrix.md says what the feature tests found, row by row.

The page is rendered from ``docs/support-matrix.json`` alone (``tools/support_matrix.py``),
the record of each device's run: every committed row must be what that record renders.
The CPU column's record must be this session's (the check runs after every feature test,
``after_features``): every feature ``shared/test_features.py``
decided on the CPU has the committed cell, and every committed CPU row was decided by
this session.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import feature_matrix
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import support_matrix

REGENERATE = (
    "regenerate it: SUPPORT_MATRIX_RESULTS=cpu.json pytest -m e2e "
    "tests/shared/test_features.py, "
    "then python tools/support_matrix.py --cpu cpu.json"
)


def test_every_committed_row_is_what_its_run_recorded() -> None:
    record = json.loads(support_matrix.RECORD.read_text())
    assert support_matrix.MATRIX.read_text() == support_matrix.render(record), (
        "docs/support-matrix.md is not what docs/support-matrix.json renders: " + REGENERATE
    )
    for device, column in record["columns"].items():
        assert set(column["run"]) == {"date", "vllm", "torch"}, device
        assert column["features"], f"the {device} column's run decided no feature"


@pytest.mark.e2e
@pytest.mark.after_features
def test_the_committed_cpu_column_is_what_the_feature_tests_found(request) -> None:
    results = request.config.stash.get(feature_matrix.RESULTS, {}).get("cpu")
    if not results:
        pytest.skip("no feature test ran on the CPU in this session (test_features)")
    found = feature_matrix.cell_texts(feature_matrix.cells(results))
    record = json.loads(support_matrix.RECORD.read_text())
    committed = feature_matrix.cell_texts(record["columns"]["cpu"]["features"])
    stale = {f: (committed.get(f, "<absent>"), cell) for f, cell in found.items()
             if committed.get(f) != cell}  # fmt: skip
    assert not stale, f"the committed CPU column disagrees with this session: {stale}; {REGENERATE}"
    undecided = sorted(set(committed) - set(found))
    assert not undecided, (
        f"committed CPU rows no test of this session decided: {undecided} (their tests were "
        f"not collected or no longer exist); {REGENERATE}"
    )


def test_a_column_without_a_run_says_why_and_a_row_without_a_test_says_so(tmp_path) -> None:
    run = {"date": "2026-12-07", "vllm": "0.32.0", "torch": "2.13.0"}
    cpu, gpu = tmp_path / "cpu.json", tmp_path / "gpu.json"
    lora = {"LoRA": {"cell": "passed", "tests": "test_lora"}}
    cpu.write_text(json.dumps({"run": run, "devices": {"cpu": lora}}))
    with pytest.raises(SystemExit, match="no results and no reason for test-device, gpu"):
        support_matrix.updated({}, {"cpu": cpu}, {})
    sleep = {"sleep mode": {"cell": "passed", "tests": "test_sleep"}}
    gpu.write_text(json.dumps({"run": run, "devices": {"cuda": sleep}}))
    reason = "no test starts the feature engines on it"
    record = support_matrix.updated({}, {"cpu": cpu, "gpu": gpu}, {"test-device": reason})
    page = support_matrix.render(record)
    rows = {line.split(" | ")[0]: line for line in page.splitlines()}
    assert rows["| LoRA"] == (
        "| LoRA | passed | not run [1] | not run: this device's run has no test of it | test_lora |"
    )
    assert f"- [1] PrivateUse1 test device: {reason}" in page.splitlines()
    # the test device's column: the one device of its session that is neither the CPU nor CUDA
    test_device = tmp_path / "td.json"
    test_device.write_text(json.dumps({"run": run, "devices": {"my_dev": lora}}))
    record = support_matrix.updated(record, {"test-device": test_device}, {})
    assert record["columns"]["test-device"]["features"] == lora
    with pytest.raises(SystemExit, match="no single device for the test-device column"):
        support_matrix.updated(record, {"test-device": cpu}, {})

"""docs/support-matrix.md from the feature tests' results: feature x device, every cell a test's.

    SUPPORT_MATRIX_RESULTS=cpu.json pytest tests/shared/test_features.py
    python tools/support_matrix.py --cpu cpu.json [--gpu gpu.json] [--test-device td.json] \\
        [--why-not DEVICE=REASON]

Each results file is what ``tests/conftest.py`` writes for a session
(``feature_matrix.session_record``: the run's date and versions, per device and feature its
cell and its tests); the test device's comes from a first-light plugin's session (its CI,
run by the vllm-platform-template project's clean-machine test). The columns given replace those of
``docs/support-matrix.json``, the record the page is rendered from; a device without a
column carries the reason it did not run (``--why-not``, required for it), in the record
too. The page is a function of the record alone, so ``tests/full_plugin/
test_support_matrix.py`` checks every committed row against the run it came from, and the
CPU column against the session that runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEVICES = ("cpu", "test-device", "gpu")
TITLES = {"cpu": "CPU (template CPU platform)", "test-device": "PrivateUse1 test device",
          "gpu": "CUDA"}  # fmt: skip
DOCS = Path(__file__).resolve().parents[1] / "docs"
MATRIX = DOCS / "support-matrix.md"
RECORD = DOCS / "support-matrix.json"
# the torch device type of each column's results (the test device's is the plugin's own)
TORCH_DEVICE = {"cpu": "cpu", "gpu": "cuda"}
HEADER = "| feature | " + " | ".join(TITLES[d] for d in DEVICES) + " | tests |"


def render(record: dict[str, Any]) -> str:
    """The page: a row per feature any column has, a column per device."""
    columns: dict[str, dict[str, Any]] = record["columns"]
    why_not: dict[str, str] = record["why_not"]
    features = sorted({f for column in columns.values() for f in column["features"]})
    absent = [d for d in DEVICES if d not in columns]
    notes = [f"[{n}] {TITLES[d]}: {why_not[d]}" for n, d in enumerate(absent, 1)]
    rows = []
    for feature in features:
        cells = []
        for device in DEVICES:
            if device not in columns:
                cells.append(f"not run [{absent.index(device) + 1}]")
                continue
            found = columns[device]["features"].get(feature)
            cells.append(found["cell"] if found else "not run: this device's run has no test of it")
        tests = sorted({t for c in columns.values() if feature in c["features"]
                        for t in c["features"][feature]["tests"].split(", ")})  # fmt: skip
        rows.append(f"| {feature} | " + " | ".join(cells) + f" | {', '.join(tests)} |")
    runs = "; ".join(
        f"{TITLES[d]}: run {columns[d]['run']['date']}, vLLM {columns[d]['run']['vllm']}, "
        f"torch {columns[d]['run']['torch']}"
        for d in DEVICES
        if d in columns
    )
    return "\n".join([
        "# Support matrix: vLLM's features on the template platforms",
        "",
        "Written by `tools/support_matrix.py` from the feature tests' results "
        f"(`docs/support-matrix.json`). {runs}. Every cell is its tests' outcome: passed "
        "(every test of the feature passed: the template's answer equals stock vLLM's - "
        "on a device stock has no platform for, stock vLLM CPU's: tokens and logprobs "
        "equal, vectors within 2e-5, seeded samples checked for their seed - and the test "
        "checked the feature did what it names), refused (by a config check, with the "
        "reason, and whether stock refuses it too), failed (naming the test), not run (with "
        "what did not run and why, a column's in its note below the table), or the tests "
        "that passed and those that did not run. Tests: "
        "`tests/shared/test_features.py`; CI checks "
        "every row against the record, the CPU column against its own run "
        "(`tests/full_plugin/test_support_matrix.py`) and the test device's against a "
        "first-light plugin's CI (the vllm-platform-template project's clean-machine test).",
        "",
        HEADER,
        "|---|" + "---|" * (len(DEVICES) + 1),
        *rows,
        "",
        *(["Not run:", "", *(f"- {note}" for note in notes), ""] if notes else []),
    ])  # fmt: skip


def column_of(session: dict[str, Any], column: str, path: Path) -> dict[str, Any]:
    """A session's results for one column: the CPU's, CUDA's, or the one other device's (the
    PrivateUse1 test device, named as the plugin that ran it names it)."""
    devices = session["devices"]
    if column in TORCH_DEVICE:
        names = [TORCH_DEVICE[column]] if TORCH_DEVICE[column] in devices else []
    else:
        names = [d for d in devices if d not in TORCH_DEVICE.values()]
    if len(names) != 1:
        sys.exit(f"{path}: no single device for the {column} column among {sorted(devices)}")
    return {"run": session["run"], "features": devices[names[0]]}


def updated(record: dict[str, Any], results: dict[str, Path], why_not: dict[str, str]) -> dict:
    """The record with the given devices' columns replaced; every absent column needs a reason."""
    columns = dict(record.get("columns", {}))
    for column, path in results.items():
        columns[column] = column_of(json.loads(path.read_text()), column, path)
    reasons = {d: r for d, r in {**record.get("why_not", {}), **why_not}.items()
               if d not in columns}  # fmt: skip
    missing = [d for d in DEVICES if d not in columns and d not in reasons]
    if missing:
        sys.exit(f"no results and no reason for {', '.join(missing)}: pass --why-not DEVICE=REASON")
    return {"columns": {d: columns[d] for d in DEVICES if d in columns}, "why_not": reasons}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for device in DEVICES:
        parser.add_argument(f"--{device}", type=Path, help=f"results of the {device} session")
    parser.add_argument("--why-not", action="append", default=[], help="DEVICE=REASON")
    args = parser.parse_args()
    given = {d: path for d in DEVICES if (path := getattr(args, d.replace("-", "_")))}
    why_not = dict(item.split("=", 1) for item in args.why_not)
    old = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    record = updated(old, given, why_not)
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    MATRIX.write_text(render(record))
    print(f"wrote {RECORD} and {MATRIX}")


if __name__ == "__main__":
    main()

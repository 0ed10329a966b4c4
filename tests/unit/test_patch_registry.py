"""The patch registry's claim: no module outside it rebinds vLLM or torch objects."""

from __future__ import annotations

import re
from pathlib import Path

from vllm_platform_template.patches import PATCHES

PACKAGE = Path(__file__).resolve().parents[2] / "vllm_platform_template"
# mock.patch / patch.object, MethodType rebinding, assignment to a vllm/torch module attribute
# (torch's own ``<config>.patch(...)`` API for config values is not a rebinding)
REBINDING = re.compile(
    r"unittest\.mock|(?<![\w.])patch\(|patch\.object|types\.MethodType|"
    r"^\s*(?:vllm|torch)\.[\w.]+\s*=[^=]",
    re.MULTILINE,
)


def test_no_rebinding_outside_the_registry() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "patches.py" or "tests" in path.parts:
            continue
        for match in REBINDING.finditer(path.read_text()):
            offenders.append(f"{path.relative_to(PACKAGE)}: {match.group(0).strip()}")
    assert offenders == [], offenders


def test_every_entry_documents_itself() -> None:
    for patch in PATCHES:
        assert patch.why and patch.upstream and patch.remove_when, patch.name
        assert (patch.scope == "process") == (patch.apply is not None), patch.name
        assert patch.scope in ("process", "call") and (patch.scope == "process" or patch.caller)

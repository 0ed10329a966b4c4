"""Every citation of docs/porting-guide.md names a section it has.

Error messages and docstrings send a reader to the guide by a section's title,
``docs/porting-guide.md, "Graph capture"`` (or with its number, ``"13. Graph
capture"``); citations by number alone once left four of them pointing at the wrong
section after the guide grew. This test reads every text file of the project that
cites the guide and fails on a title the guide does not have, a wrong number, or a
bare "section N".
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "porting-guide.md"
RESULTS = ("docs", "results")  # measured output, not prose
GUIDE_PATH = "docs/porting-guide.md"
CITATION = re.compile(re.escape(GUIDE_PATH) + r",?\s+([\"'])(.+?)\1", re.DOTALL)
BARE_NUMBER = re.compile(r"\bsections? \d+\b|porting-guide\.md`? \(\d+-\d+\)")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".ini", ".txt", ""}


def _sections() -> set[str]:
    """Every heading, as written ("13. Graph capture") and by its title alone."""
    headings = re.findall(r"^#{2,3} (.+?)\s*$", GUIDE.read_text(), flags=re.MULTILINE)
    return set(headings) | {re.sub(r"^\d+\. ", "", h) for h in headings}


def _text(path: Path) -> str:
    """``path``'s text with Python's implicit string concatenation joined."""
    return re.sub(r"[\"']\s*\n\s*f?[\"']", "", path.read_text(errors="replace"))


def _project_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:  # not a git checkout: the project's files, not its caches
        return [
            p
            for p in ROOT.rglob("*")
            if p.is_file()
            and not any(
                part.startswith(".") or part in ("__pycache__", "build")
                for part in p.relative_to(ROOT).parts[:-1]
            )
        ]
    return [ROOT / line for line in listed.stdout.splitlines()]


def _citing_files() -> list[Path]:
    return [
        path
        for path in _project_files()
        if path.suffix in TEXT_SUFFIXES
        and path.is_file()
        and path.relative_to(ROOT).parts[:2] != RESULTS
        and path != Path(__file__).resolve()
        and "porting-guide" in path.read_text(errors="replace")
    ]


def test_every_cited_section_is_one_the_guide_has() -> None:
    sections = _sections()
    wrong = []
    for path in _citing_files():
        for match in CITATION.finditer(_text(path)):
            title = " ".join(match.group(2).split())
            if title not in sections:
                wrong.append(f"{path.relative_to(ROOT)}: {title!r}")
    assert wrong == [], f"sections docs/porting-guide.md does not have: {wrong}"


def test_no_citation_by_a_bare_section_number() -> None:
    bare = []
    for path in [*_citing_files(), GUIDE]:
        for match in BARE_NUMBER.finditer(path.read_text(errors="replace")):
            bare.append(f"{path.relative_to(ROOT)}: {match.group(0)!r}")
    assert bare == [], f"cite the section by its title ('13. Graph capture'): {bare}"


def test_the_check_reads_the_citations_it_guards() -> None:
    """A test that cannot fail is a defect: a wrong title is found in a citing text."""
    text = 'see docs/porting-guide.md, "11. Graph capture" and docs/porting-guide.md, "Ray"'
    titles = [" ".join(m.group(2).split()) for m in CITATION.finditer(text)]
    assert titles == ["11. Graph capture", "Ray"]
    assert "11. Graph capture" not in _sections() and "Ray" in _sections()
    assert BARE_NUMBER.search("Graph capture (section 13) needs")

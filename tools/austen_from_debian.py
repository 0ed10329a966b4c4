"""Extract Jane Austen's novels from Debian's ``r-cran-janeaustenr`` without R.

The ``tiny`` model's training text comes from this package (*Pride and
Prejudice* is shipped in ``vllm_platform_template_tools/embedded_model/text/``; the
five other novels are not, ``tools/train_tiny_model.py`` reads them from this
tool's output): CRAN's ``janeaustenr`` 1.0.0 (Julia Silge; code MIT,
the novels public domain) ships Austen's six completed novels as R character
vectors, one line of the Project Gutenberg edition per element, in R's lazy-load
database ``data/Rdata.rdb`` (zlib-compressed XDR serialisations) indexed by
``data/Rdata.rdx``. This decodes the part of R's serialisation format those
objects use and writes each novel's lines, each ended by ``\\n``, unchanged:

    python tools/austen_from_debian.py OUT_DIR            # runs apt-get download
    python tools/austen_from_debian.py OUT_DIR --deb FILE # a downloaded .deb
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

PACKAGE = "r-cran-janeaustenr"
DATA = "usr/lib/R/site-library/janeaustenr/data"
NOVELS = {
    "sensesensibility": "sense_and_sensibility.txt",
    "prideprejudice": "pride_and_prejudice.txt",
    "mansfieldpark": "mansfield_park.txt",
    "emma": "emma.txt",
    "northangerabbey": "northanger_abbey.txt",
    "persuasion": "persuasion.txt",
}
# R's SEXP types used by these objects (R Internals, "Serialization Formats").
SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 1, 2, 9, 10, 13, 14, 16, 19
REFSXP, NILVALUE_SXP = 255, 254


class _Reader:
    """R's XDR serialisation (format 2 or 3), the subset of types listed above."""

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise ValueError("not an XDR R serialisation")
        self.data, self.pos, self.refs = data, 2, []  # type: ignore[var-annotated]
        version = self.int()
        self.int(), self.int()  # writer's R version, minimal reader version
        if version == 3:
            encoding_length = self.int()
            self.pos += encoding_length  # the writer's native encoding name

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def item(self) -> Any:
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == NILVALUE_SXP:
            return None
        if kind == REFSXP:
            return self.refs[(flags >> 8) - 1]
        if kind == SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if kind == CHARSXP:
            n = self.int()
            if n == -1:
                return None
            text = self.data[self.pos : self.pos + n].decode("utf-8")
            self.pos += n
            return text
        if kind == LISTSXP:  # pairlist: a dict of tag -> value
            out: dict[Any, Any] = {}
            while kind == LISTSXP:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else len(out)
                out[tag] = self.item()
                flags = self.int()
                kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
            if kind != NILVALUE_SXP:
                raise ValueError(f"pairlist ends with type {kind}")
            return out
        n = self.int()
        if kind in (INTSXP, LGLSXP):
            value: Any = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
        elif kind == REALSXP:
            value = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
        elif kind in (STRSXP, VECSXP):
            value = [self.item() for _ in range(n)]
        else:
            raise ValueError(f"R type {kind} is not decoded here")
        if has_attr:
            attributes = self.item()
            names = attributes.get("names") if isinstance(attributes, dict) else None
            if kind == VECSXP and names:
                value = dict(zip(names, value, strict=True))
        return value


def _unserialize(blob: bytes) -> Any:
    """One ``.rdb`` entry: its uncompressed length (4 bytes, big-endian), then zlib data."""
    (length,) = struct.unpack_from(">i", blob, 0)
    data = zlib.decompress(blob[4:])
    if len(data) != length:
        raise ValueError(f"expected {length} bytes, got {len(data)}")
    return _Reader(data).item()


def novels(data_dir: Path) -> dict[str, str]:
    """Each novel's text (lines joined with newlines), by janeaustenr's object name."""
    index = _Reader(gzip.decompress((data_dir / "Rdata.rdx").read_bytes())).item()
    rdb = (data_dir / "Rdata.rdb").read_bytes()
    out = {}
    for name in NOVELS:
        offset, length = index["variables"][name]
        lines = _unserialize(rdb[offset : offset + length])
        out[name] = "".join(f"{line or ''}\n" for line in lines)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--deb", type=Path, help=f"a downloaded {PACKAGE} .deb")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        deb = args.deb
        if deb is None:
            subprocess.run(["apt-get", "download", PACKAGE], cwd=tmp, check=True)
            deb = next(Path(tmp).glob(f"{PACKAGE}_*.deb"))
        subprocess.run(["dpkg", "-x", str(deb), f"{tmp}/x"], check=True)
        texts = novels(Path(tmp, "x", DATA))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        path = args.out / NOVELS[name]
        path.write_text(text)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        print(f"{path.name}: {len(text):,} characters, sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

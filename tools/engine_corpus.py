"""The real engine files stored as test data in tests/data/engines (INDEX.md rows).

`corpus_files(name)` lists the rows for one file name (``ple_layer.py``,
``runtime_defaults.py``), each with the path of its bytes; `check(row)` raises when the bytes
differ from INDEX.md (sha256, size). Reused by tools/pin_manifest.py and the tests.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "engines"
COLUMNS = ("label", "file", "repository", "commit", "date", "bytes", "sha256", "pin", "shape")


@dataclass(frozen=True)
class CorpusFile:
    label: str
    file: str
    repository: str
    commit: str
    date: str
    size: int
    sha256: str
    pin: str  # "main", "release <version>" or "no"
    shape: str
    path: Path

    @property
    def release(self) -> str | None:
        return self.pin.split(None, 1)[1] if self.pin.startswith("release ") else None

    @property
    def plausible_install(self) -> bool:
        return self.pin == "main" or self.release is not None


def parse_index(text: str, base: Path = CORPUS_DIR) -> list[CorpusFile]:
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(COLUMNS) or not re.fullmatch(r"[0-9a-f]{64}", cells[6]):
            continue
        label, file, repo, commit, date, size, sha, pin, shape = cells
        if not (pin in ("main", "no") or re.fullmatch(r"release \S+", pin)):
            raise ValueError(f"INDEX.md row {label}: pin must be main, no or 'release <version>', not {pin!r}")
        rows.append(CorpusFile(label, file, repo, commit, date, int(size), sha, pin, shape, base / label / file))
    return rows


def corpus_files(name: str = "ple_layer.py", base: Path = CORPUS_DIR) -> list[CorpusFile]:
    index = base / "INDEX.md"
    if not index.is_file():
        return []
    return [row for row in parse_index(index.read_text(encoding="utf-8"), base) if row.file == name]


def check(row: CorpusFile) -> bytes:
    """The row's bytes, after checking them against INDEX.md."""
    data = row.path.read_bytes()
    if len(data) != row.size or hashlib.sha256(data).hexdigest() != row.sha256:
        raise ValueError(f"{row.path}: sha256/size differ from tests/data/engines/INDEX.md")
    return data

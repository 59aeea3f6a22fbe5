"""Where the engine files of this repository's tools and tests are: the real `ple_layer.py`
files in ../shared/engines (rows of its INDEX.md) and the stand-in engine's file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ple4patch.paths import TARGET_REL

REPO = Path(__file__).resolve().parents[1]
SHARED_ENGINES = REPO.parent / "shared" / "engines"
STANDIN_DIR = REPO / "tests" / "fixtures" / "standin_engine"
TEST_MANIFEST = REPO / "tests" / "fixtures" / "standin_manifest.json"  # pins the stand-in


@dataclass(frozen=True)
class SharedEngine:
    folder: str
    commit: str
    era: str
    size: int
    sha256: str
    path: Path

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()


def parse_index(text: str, base: Path) -> list[SharedEngine]:
    """The rows of ../shared/engines/INDEX.md (folder | commit | era | bytes | sha256)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[0-9a-f]{64}", cells[4]):
            continue
        folder, commit, era, size, sha = cells
        rows.append(
            SharedEngine(folder, commit.split()[0], era, int(size), sha, base / folder / "ple_layer.py")
        )
    return rows


def shared_engines(base: Path = SHARED_ENGINES) -> list[SharedEngine]:
    """The real engine files (empty when ../shared is absent)."""
    index = base / "INDEX.md"
    if not index.is_file():
        return []
    return parse_index(index.read_text(encoding="utf-8"), base)


def standin_file() -> Path | None:
    path = STANDIN_DIR / TARGET_REL
    return path if path.is_file() else None

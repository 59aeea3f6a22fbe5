"""The real engine files used as test data from tests/data/engines (INDEX.md rows).

INDEX.md (committed) gives each file's provenance, size and sha256. The files themselves are
public engine code and are not committed: they live in git-ignored folders beside INDEX.md on a
machine that has them, or in a folder of the same name under ``../shared/engines`` (beside the
checkout, as CI has it: a row's file found there counts as present), and every test that reads
one skips when it is absent.

`indexed(name)` lists every INDEX.md row for one file name (``ple_layer.py``,
``runtime_defaults.py``, ``vllm.py``: the files ple4patch patches, the last the engine's
``vllm/config/vllm.py``; `ENGINE_PATHS` maps the names to their places in the engine); `corpus_files(name)` only those whose bytes are
present; `check(row)` raises when the bytes differ from INDEX.md (sha256, size), and for a
``vllm.py`` when ple4patch's detector (`policy_file.config_placement`) finds no PLE placement
in it, the one thing such a row is kept for. Reused by tools/pin_manifest.py and
the tests. ``python tools/engine_corpus.py`` checks every present file and lists the absent ones.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ple4patch.paths import CONFIG_REL, POLICY_REL, TARGET_REL  # noqa: F401 (ENGINE_PATHS)
from ple4patch.policy_file import config_placement

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "engines"
SHARED_DIR = Path(__file__).resolve().parents[2] / "shared" / "engines"  # ../shared/engines of the checkout
# The file names of INDEX.md rows, and where each file lives in an installed engine.
ENGINE_PATHS = {"ple_layer.py": TARGET_REL, "runtime_defaults.py": POLICY_REL, "vllm.py": CONFIG_REL,
                "ple_offload_layer.py": "vllm/model_executor/layers/ple_offload_layer.py",
                "argparse_utils.py": "vllm/utils/argparse_utils.py"}
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
    def present(self) -> bool:
        return self.path.is_file()

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
        if file == "argparse_utils.py" and pin != "no":
            raise ValueError(f"INDEX.md row {label}: {file} is never patched, so its pin must be no")
        rows.append(CorpusFile(label, file, repo, commit, date, int(size), sha, pin, shape, locate(base, label, file)))
    return rows


def locate(base: Path, label: str, file: str) -> Path:
    """Where a row's file is: in its folder beside INDEX.md, else (for the committed INDEX.md) in
    the folder of the same name under ../shared/engines; the first path when neither has it."""
    here = base / label / file
    if base == CORPUS_DIR and not here.is_file() and (SHARED_DIR / label / file).is_file():
        return SHARED_DIR / label / file
    return here


def stored(label: str, file: str) -> Path:
    """The path of one row's file (present or not), by its INDEX.md label and file name."""
    return locate(CORPUS_DIR, label, file)


def indexed(name: str = "ple_layer.py", base: Path = CORPUS_DIR) -> list[CorpusFile]:
    """Every INDEX.md row for file ``name``, whether its bytes are here or not."""
    index = base / "INDEX.md"
    if not index.is_file():
        return []
    return [row for row in parse_index(index.read_text(encoding="utf-8"), base) if row.file == name]


def corpus_files(name: str = "ple_layer.py", base: Path = CORPUS_DIR) -> list[CorpusFile]:
    """The INDEX.md rows for file ``name`` whose bytes are present on this machine."""
    return [row for row in indexed(name, base) if row.present]


def check(row: CorpusFile) -> bytes:
    """The row's bytes, after checking them against INDEX.md."""
    data = row.path.read_bytes()
    if len(data) != row.size or hashlib.sha256(data).hexdigest() != row.sha256:
        raise ValueError(f"{row.path}: sha256/size differ from tests/data/engines/INDEX.md")
    if row.file == "vllm.py" and not config_placement(data.decode("utf-8", errors="replace")):
        raise ValueError(f"{row.path}: ple4patch finds no PLE placement function in it (policy_file.config_placement)")
    return data


def main() -> int:
    bad = 0
    for name in sorted({row.file for row in parse_index((CORPUS_DIR / "INDEX.md").read_text(encoding="utf-8"))}):
        for row in indexed(name):
            if not row.present:
                print(f"absent   {row.label}/{row.file}")
                continue
            try:
                check(row)
            except ValueError as err:
                bad += 1
                print(f"BAD      {err}")
            else:
                print(f"ok       {row.label}/{row.file} {row.sha256[:12]}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

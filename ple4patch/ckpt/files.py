"""Read a checkpoint directory's weight files: the index, then every named file's header.

Every file is opened through :mod:`.access`: a name in the index that points
outside the directory, or a FIFO, device, socket or directory where a file
belongs, is a problem in the report, and nothing outside is ever opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .access import AccessError, exists, read_inside, resolve_inside
from .config import PleConfig, read_config
from .header import HeaderError, SafetensorsFile, TensorInfo, read_safetensors_header
from .jsonread import JsonError, parse_json
from .layout import INDEX_FILE, SINGLE_FILE
from .problem import Problem

MAX_INDEX_BYTES = 64 * 1024 * 1024  # the real index is about 30 KB; 100k tensors would be ~10 MB
MAX_INDEX_DEPTH = 32


@dataclass
class Checkpoint:
    root: Path
    config: PleConfig
    index_file: str | None
    files: dict[str, SafetensorsFile]
    tensors: dict[str, list[TensorInfo]]  # name -> every file that holds it
    problems: list[Problem]

    def tensor(self, name: str) -> TensorInfo | None:
        found = self.tensors.get(name)
        return found[0] if found else None


def read_index(root: Path, problems: list[Problem]) -> dict[str, str]:
    """tensor -> file from the index's weight_map; what cannot be used becomes a problem."""
    try:
        index = parse_json(read_inside(root, INDEX_FILE, MAX_INDEX_BYTES), max_depth=MAX_INDEX_DEPTH)
    except AccessError as exc:
        problems.append(Problem("index", f"{exc}: fetch the index again", file=INDEX_FILE))
        return {}
    except JsonError as exc:
        problems.append(Problem("index", f"cannot read weight_map ({exc}): fetch the index again", file=INDEX_FILE))
        return {}
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        why = "'weight_map'" if not isinstance(index, dict) or "weight_map" not in index else "weight_map is not an object"
        problems.append(Problem("index", f"cannot read weight_map ({why}): fetch the index again", file=INDEX_FILE))
        return {}
    wanted = {name: fname for name, fname in weight_map.items() if isinstance(fname, str)}
    for name in (n for n, f in weight_map.items() if not isinstance(f, str)):
        problems.append(Problem("index", f"the index maps it to {weight_map[name]!r:.60}, not a file name", name,
                                "a safetensors file name", INDEX_FILE))
    return wanted


def _weight_files(root: Path, problems: list[Problem]) -> tuple[str | None, dict[str, str], list[str]]:
    """(index file or None, tensor -> file from the index, the files to read)."""
    if exists(root, INDEX_FILE):
        wanted = read_index(root, problems)
        return INDEX_FILE, wanted, sorted(set(wanted.values()))
    if exists(root, SINGLE_FILE):
        return None, {}, [SINGLE_FILE]
    names = sorted(p.name for p in root.glob("*.safetensors"))
    if not names:
        problems.append(
            Problem("no_weights", f"no {INDEX_FILE}, no {SINGLE_FILE} and no *.safetensors "
                    "in the directory: the download is incomplete or this is not the checkpoint")
        )
    return None, {}, names


def _read_file(root: Path, fname: str, wanted: dict[str, str]) -> SafetensorsFile | Problem:
    """One weight file's header, or the problem that keeps it from being read."""
    try:
        return read_safetensors_header(resolve_inside(root, fname), fname)
    except AccessError as exc:
        if exc.code == "missing":
            held = sum(1 for f in wanted.values() if f == fname)
            how = " (a dangling symlink)" if "dangling" in exc.message else ""
            return Problem("missing_file", f"listed in the index for {held} tensors but not on disk{how}: "
                           "the download is incomplete", file=fname)
        if exc.code in ("outside", "not_a_file"):
            return Problem(exc.code, str(exc), file=fname, expected="a regular file inside the checkpoint directory")
        return Problem("header", f"unreadable safetensors header: {exc}", file=fname)
    except (OSError, HeaderError) as exc:
        return Problem("header", f"unreadable safetensors header: {exc}", file=fname)


def _cross_checks(files: dict[str, SafetensorsFile], tensors: dict[str, list[TensorInfo]],
                  wanted: dict[str, str]) -> list[Problem]:
    """Tensors held by two files; index entries whose file lacks them."""
    problems = []
    for name, infos in sorted(tensors.items()):
        if len(infos) > 1:
            problems.append(
                Problem("duplicate", "held by more than one file: "
                        + ", ".join(i.file for i in infos)
                        + "; the engine loads every copy, so keep it in exactly one",
                        name, expected="one file", file=infos[0].file)
            )
    for name, fname in sorted(wanted.items()):
        if fname in files and name not in files[fname].tensors:
            problems.append(
                Problem("index_mismatch", f"the index maps it to {fname}, whose header lacks it",
                        name, file=fname)
            )
    return problems


def load_checkpoint(root: Path, raw_config: dict[str, Any]) -> Checkpoint:
    """Read the index and every shard file's header. Defects become problems."""
    problems: list[Problem] = []
    config = read_config(raw_config)
    index_file, wanted, file_names = _weight_files(root, problems)

    files: dict[str, SafetensorsFile] = {}
    tensors: dict[str, list[TensorInfo]] = {}
    for fname in file_names:
        found = _read_file(root, fname, wanted)
        if isinstance(found, Problem):
            problems.append(found)
            continue
        files[fname] = found
        problems.extend(found.problems)
        for info in found.tensors.values():
            tensors.setdefault(info.name, []).append(info)

    problems += _cross_checks(files, tensors, wanted)
    return Checkpoint(root, config, index_file, files, tensors, problems)

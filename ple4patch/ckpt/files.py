"""Read a checkpoint directory's weight files: the index, then every named file's header."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import PleConfig, read_config
from .header import HeaderError, SafetensorsFile, TensorInfo, read_safetensors_header
from .layout import INDEX_FILE, SINGLE_FILE
from .problem import Problem


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


def _weight_files(root: Path, problems: list[Problem]) -> tuple[str | None, dict[str, str], list[str]]:
    """(index file or None, tensor -> file from the index, the files to read)."""
    wanted: dict[str, str] = {}
    index_path = root / INDEX_FILE
    if index_path.is_file():
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
            weight_map = index["weight_map"]
            if not isinstance(weight_map, dict):
                raise TypeError("weight_map is not an object")
            wanted = {str(k): str(v) for k, v in weight_map.items()}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            problems.append(
                Problem("index", f"cannot read weight_map ({exc}): fetch the index again",
                        file=INDEX_FILE)
            )
        return INDEX_FILE, wanted, sorted(set(wanted.values()))
    if (root / SINGLE_FILE).is_file():
        return None, wanted, [SINGLE_FILE]
    names = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
    if not names:
        problems.append(
            Problem("no_weights", f"no {INDEX_FILE}, no {SINGLE_FILE} and no *.safetensors "
                    "in the directory: the download is incomplete or this is not the checkpoint")
        )
    return None, wanted, names


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
        path = root / fname
        if not path.is_file():
            held = sum(1 for f in wanted.values() if f == fname)
            problems.append(
                Problem("missing_file", f"listed in the index for {held} tensors but not on disk: "
                        "the download is incomplete", file=fname)
            )
            continue
        try:
            sfile = read_safetensors_header(path, fname)
        except (OSError, HeaderError) as exc:
            problems.append(Problem("header", f"unreadable safetensors header: {exc}", file=fname))
            continue
        files[fname] = sfile
        problems.extend(sfile.problems)
        for info in sfile.tensors.values():
            tensors.setdefault(info.name, []).append(info)

    problems += _cross_checks(files, tensors, wanted)
    return Checkpoint(root, config, index_file, files, tensors, problems)

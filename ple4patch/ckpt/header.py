"""Read one safetensors file's header (8-byte little-endian length + JSON); no tensor data."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .layout import DTYPE_BYTES
from .problem import Problem

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit


@dataclass(frozen=True)
class TensorInfo:
    name: str
    file: str  # relative to the checkpoint directory
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset of the data in the file
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        return f"{self.dtype} {list(self.shape)}"


class HeaderError(ValueError):
    """A safetensors file whose header cannot be read."""


@dataclass
class SafetensorsFile:
    path: Path
    name: str
    size: int
    data_start: int
    tensors: dict[str, TensorInfo]
    problems: list[Problem] = field(default_factory=list)


def _dims(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(isinstance(d, int) and d >= 0 for d in value):
        return None
    return tuple(value)


def read_safetensors_header(path: Path, name: str | None = None) -> SafetensorsFile:
    """Parse one file's header (no tensor data is read).

    Raises HeaderError when the header itself is unreadable; per-tensor defects
    (bad offsets, data past the end of a truncated file) become problems.
    """
    name = name or path.name
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise HeaderError(f"{size} bytes: too short for a safetensors header")
        length = int.from_bytes(head, "little")
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise HeaderError(
                f"header length {length} does not fit the file ({size} bytes): "
                "truncated or not a safetensors file"
            )
        raw = handle.read(length)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeaderError(f"header is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise HeaderError("header is not a JSON object")
    data_start = 8 + length
    data_len = size - data_start
    tensors: dict[str, TensorInfo] = {}
    problems: list[Problem] = []
    for tname, entry in meta.items():
        if tname == "__metadata__":
            continue
        if not isinstance(entry, dict):
            problems.append(Problem("header", "header entry is not an object", tname, file=name))
            continue
        dtype, shape, offsets = entry.get("dtype"), _dims(entry.get("shape")), entry.get("data_offsets")
        if (
            not isinstance(dtype, str)
            or shape is None
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            problems.append(
                Problem("header", "malformed header entry", tname, "dtype, shape, data_offsets", name)
            )
            continue
        begin, end = offsets
        itemsize = DTYPE_BYTES.get(dtype)
        if itemsize is not None and end - begin != math.prod(shape) * itemsize:
            problems.append(
                Problem(
                    "header",
                    f"data_offsets span {end - begin} bytes for {dtype} {list(shape)}",
                    tname,
                    f"{math.prod(shape) * itemsize} bytes",
                    name,
                )
            )
        if end > data_len:
            problems.append(
                Problem(
                    "truncated",
                    f"data ends at byte {data_start + end} but the file has {size} bytes: "
                    "the download is incomplete, fetch this file again",
                    tname,
                    file=name,
                )
            )
        tensors[tname] = TensorInfo(tname, name, dtype, shape, data_start + begin, end - begin)
    return SafetensorsFile(path, name, size, data_start, tensors, problems)

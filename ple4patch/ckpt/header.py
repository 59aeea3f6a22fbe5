"""Read one safetensors file's header (8-byte little-endian length + JSON) by the format's own rules.

No tensor data is read. The rules are the safetensors library's (checked
against safetensors 0.8 in the tests): a header of at most 100,000,000 bytes,
JSON as serde_json reads it, a known dtype, a shape of unsigned integers (not
booleans, not floats), ``data_offsets`` that tile the data block from its first
byte to the file's last with no gap and no overlap, and dtype size x shape =
the bytes each tensor spans. A file the library would refuse always gets a
problem here, so ``inspect`` never calls it loadable.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .access import open_regular
from .jsonread import STRICT_MAX_DEPTH, JsonError, parse_json
from .layout import DTYPE_BITS
from .problem import Problem

MAX_HEADER_BYTES = 100_000_000  # the safetensors library's MAX_HEADER_SIZE: it refuses one byte more
USIZE_LIMIT = 1 << 64  # shapes and offsets are Rust usize (u64) in the library


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


def _usize(value: Any) -> bool:
    return type(value) is int and 0 <= value < USIZE_LIMIT


def _dims(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(_usize(d) for d in value):
        return None
    return tuple(value)


def _span(dtype: str, shape: tuple[int, ...]) -> int | str:
    """Bytes the tensor's data takes, or why the library refuses the entry."""
    count = 1
    for dim in shape:  # stops at the first overflow, as the library's checked_mul does
        count *= dim
        if count >= USIZE_LIMIT:
            return "overflows a 64-bit size"
    bits = count * DTYPE_BITS[dtype]
    if bits >= USIZE_LIMIT:
        return "overflows a 64-bit size"
    if bits % 8:
        return f"is {bits} bits, not a whole number of bytes"
    return bits // 8


_FIELDS = ("dtype", "shape", "data_offsets")


def _typed(tname: str, entry: Any, name: str) -> Problem | None:
    """The problem with an entry's fields and their JSON types, as the library deserializes them."""
    if not isinstance(entry, dict):
        return Problem("header", "header entry is not an object", tname, file=name)
    dtype, shape, offsets = entry.get("dtype"), _dims(entry.get("shape")), entry.get("data_offsets")
    twice = sorted({k for k, _ in getattr(entry, "shadowed", ()) if k in _FIELDS})
    if (
        twice
        or not isinstance(dtype, str)
        or shape is None
        or not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_usize(o) for o in offsets)
    ):
        return Problem("header", "malformed header entry" + (f" ({', '.join(twice)} given twice)" if twice else ""),
                       tname, "dtype, shape, data_offsets", name)
    if dtype not in DTYPE_BITS:
        return Problem("header", f"dtype {dtype!r} is not a safetensors dtype", tname, ", ".join(DTYPE_BITS), name)
    return None


def _entry(tname: str, entry: Any, name: str, data_start: int, size: int,
           problems: list[Problem]) -> TensorInfo | None:
    """One header entry as a TensorInfo (None when malformed); its defects go into ``problems``."""
    typed = _typed(tname, entry, name)
    if typed is None and not entry["data_offsets"][0] <= entry["data_offsets"][1]:
        typed = Problem("header", "malformed header entry", tname, "dtype, shape, data_offsets", name)
    if typed is not None:
        problems.append(typed)
        return None
    dtype, shape = entry["dtype"], tuple(entry["shape"])
    begin, end = entry["data_offsets"]
    span = _span(dtype, shape)
    if isinstance(span, str):
        problems.append(Problem("header", f"{dtype} {list(shape)} {span}", tname, file=name))
        return None
    if end - begin != span:
        problems.append(Problem("header", f"data_offsets span {end - begin} bytes for {dtype} {list(shape)}",
                                tname, f"{span} bytes", name))
    if end > size - data_start:
        problems.append(
            Problem("truncated", f"data ends at byte {data_start + end} but the file has {size} bytes: "
                    "the download is incomplete, fetch this file again", tname, file=name)
        )
    return TensorInfo(tname, name, dtype, shape, data_start + begin, end - begin)


def _metadata_ok(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))


def _shadowed(meta: dict[str, Any], name: str) -> list[Problem]:
    """__metadata__ as the library takes it, and the entries a repeated name replaced (it checks them too)."""
    problems = []
    shadowed = getattr(meta, "shadowed", [])
    if not _metadata_ok(meta.get("__metadata__")) or any(k == "__metadata__" for k, _ in shadowed):
        problems.append(Problem("header", "__metadata__ is not one object of strings", "__metadata__",
                                '{"key": "value", ...} once, or absent', name))
    for tname, entry in shadowed:
        if tname != "__metadata__":
            typed = _typed(tname, entry, name)
            if typed is not None:
                problems.append(Problem("header", f"{typed.message} (an earlier entry of the same name)",
                                        tname, typed.expected, name))
    return problems


def _coverage(meta: dict[str, Any], name: str, data_len: int) -> list[Problem]:
    """The data block tiled by the tensors' offsets, from its first byte to the file's last."""
    spans = sorted(
        (tuple(e["data_offsets"]), t)
        for t, e in meta.items()
        if t != "__metadata__" and isinstance(e, dict) and isinstance(e.get("data_offsets"), list)
        and len(e["data_offsets"]) == 2 and all(_usize(o) for o in e["data_offsets"])
    )
    problems = []
    covered, previous = 0, None
    for (begin, end), tname in spans:
        if begin < covered:
            problems.append(Problem("header", f"data_offsets [{begin}, {end}] overlap those of {previous}",
                                    tname, "each tensor's bytes its own", name))
        elif begin > covered:
            problems.append(Problem("header", f"bytes {covered}..{begin} of the data belong to no tensor",
                                    tname, "tensors that cover the data with no gap", name))
        covered, previous = end, tname
    if covered < data_len:
        problems.append(Problem("header", f"the file has {data_len - covered} bytes after the last tensor's "
                                "data: the safetensors library refuses a file its header does not cover",
                                expected="no bytes after the data", file=name))
    return problems


def read_safetensors_header(path: Path, name: str | None = None) -> SafetensorsFile:
    """Parse one file's header (no tensor data is read).

    Raises HeaderError when the header itself is unreadable, and
    :class:`~.access.AccessError` when ``path`` is not a regular file;
    per-tensor defects (bad offsets, data past the end of a truncated file)
    become problems.
    """
    name = name or path.name
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
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
    if len(raw) < length:
        raise HeaderError(f"the file ended inside its {length}-byte header (it shrank while read)")
    try:
        meta = parse_json(raw, max_depth=STRICT_MAX_DEPTH, strict=True)
    except JsonError as exc:
        raise HeaderError(f"header: {exc}") from None
    if not isinstance(meta, dict):
        raise HeaderError("header is not a JSON object")
    data_start = 8 + length
    tensors: dict[str, TensorInfo] = {}
    problems: list[Problem] = []
    problems += _shadowed(meta, name)
    for tname, entry in meta.items():
        if tname == "__metadata__":
            continue
        info = _entry(tname, entry, name, data_start, size, problems)
        if info is not None:
            tensors[tname] = info
    problems += _coverage(meta, name, size - data_start)
    return SafetensorsFile(path, name, size, data_start, tensors, problems)

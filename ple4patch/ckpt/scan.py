"""``inspect --scan``: stream the PLE bytes in bounded chunks and count bad scales.

E4M3 classes: 0x7F/0xFF are NaN; a set sign bit with a non-zero magnitude is
negative (ModelOpt never writes one: it flips the block's signs); 0x80 (-0) is
counted apart and is not a problem, since it decodes every value of its block
to a signed zero exactly as +0 does.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from .access import open_inside
from .files import Checkpoint
from .header import TensorInfo
from .layout import (
    BLOCK_SCALE_DTYPES,
    FP8_WEIGHT_DTYPE,
    LAYOUT_FP8,
    NVFP4_CODES_DTYPE,
    NVFP4_LAYOUTS,
    codes_width,
    rowpacked_width,
    scales_width,
)
from .problem import Problem
from .table import TableReport

#: E4M3 byte classes: N = NaN (0x7F, 0xFF), - = negative non-zero (0x81..0xFE), z = -0 (0x80).
_E4M3_CLASS = bytes(
    ord("N") if b in (0x7F, 0xFF) else ord("z") if b == 0x80 else ord("-") if b & 0x80 else ord(".")
    for b in range(256)
)
CHUNK_BYTES = 8 * 1024 * 1024

ROWPACKED, BLOCK_SCALES, FP8_VALUES = "rowpacked", "block_scales", "fp8_values"


@dataclass
class ScaleCount:
    tensor: str
    file: str
    values: int = 0  # block scales (or FP8 values) looked at
    nan: int = 0
    negative: int = 0  # sign bit set, value not zero
    negative_zero: int = 0  # 0x80: decodes to -0 x code = ±0, counted but harmless
    first_nan_row: int | None = None
    first_negative_row: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ScanResult:
    bytes_read: int = 0
    block_scales: int = 0
    fp8_values: int = 0
    nan_block_scales: int = 0
    negative_block_scales: int = 0
    negative_zero_block_scales: int = 0
    nan_fp8_values: int = 0
    global_scales: list[dict[str, Any]] = field(default_factory=list)
    bad_global_scales: int = 0
    per_tensor: list[ScaleCount] = field(default_factory=list)  # only tensors with findings
    problems: list[Problem] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        keys = ("bytes_read", "block_scales", "nan_block_scales", "negative_block_scales",
                "negative_zero_block_scales", "fp8_values", "nan_fp8_values", "global_scales",
                "bad_global_scales")
        out = {key: getattr(self, key) for key in keys}
        out["tensors_with_findings"] = [c.to_json() for c in self.per_tensor]
        return out


def decode_scalar(raw: bytes, dtype: str) -> float:
    if dtype == "F32":
        return struct.unpack("<f", raw[:4])[0]
    if dtype == "F16":
        return struct.unpack("<e", raw[:2])[0]
    if dtype == "BF16":
        return struct.unpack("<f", b"\x00\x00" + raw[:2])[0]
    if dtype == "F64":
        return struct.unpack("<d", raw[:8])[0]
    raise ValueError(dtype)


def scan_plan(ckpt: Checkpoint, tables: list[TableReport]) -> list[tuple[str, TensorInfo, TableReport]]:
    """(what, tensor, table) for every tensor --scan reads: rowpacked/split scales, FP8 values."""
    plan = []
    for t in tables:
        if t.head_dim is None:
            continue
        if t.layout in NVFP4_LAYOUTS:  # per shard: row-packed rows, or split block scales
            width = rowpacked_width(t.head_dim)
            for i in sorted(t.shard_weights):
                w = t.shard_weights[i]
                s = t.shard_block_scales.get(i)
                if s is not None:
                    if s.dtype in BLOCK_SCALE_DTYPES:
                        plan.append((BLOCK_SCALES, s, t))
                elif w.dtype == NVFP4_CODES_DTYPE and len(w.shape) == 2 and w.shape[1] == width:
                    plan.append((ROWPACKED, w, t))
        elif t.layout == LAYOUT_FP8:
            for i in sorted(t.shard_weights):
                w = t.shard_weights[i]
                if w.dtype == FP8_WEIGHT_DTYPE:
                    plan.append((FP8_VALUES, w, t))
    return plan


def scan_bytes(plan: list[tuple[str, TensorInfo, TableReport]]) -> int:
    return sum(info.nbytes for _, info, _ in plan)


def _first(current: int | None, row: int) -> int:
    return row if current is None else min(current, row)


def _count_fp8(count: ScaleCount, chunk: bytes, row0: int, unit: int) -> None:
    nan = chunk.count(b"\x7f") + chunk.count(b"\xff")
    count.values += len(chunk)
    count.nan += nan
    if nan and count.first_nan_row is None:
        hits = [p for p in (chunk.find(b"\x7f"), chunk.find(b"\xff")) if p >= 0]
        count.first_nan_row = row0 + min(hits) // unit


def _count_scales(count: ScaleCount, columns: list[bytes], row0: int, div: int) -> None:
    """Count E4M3 classes in ``columns``; byte k of a column is row row0 + k // div."""
    for col in columns:
        classes = col.translate(_E4M3_CLASS)
        count.values += len(classes)
        nan, neg, nz = classes.count(b"N"), classes.count(b"-"), classes.count(b"z")
        count.nan += nan
        count.negative += neg
        count.negative_zero += nz
        if nan:
            count.first_nan_row = _first(count.first_nan_row, row0 + classes.find(b"N") // div)
        if neg:
            count.first_negative_row = _first(count.first_negative_row, row0 + classes.find(b"-") // div)


def _scan_tensor(ckpt: Checkpoint, what: str, info: TensorInfo, head_dim: int, chunk_bytes: int,
                 result: ScanResult, on_bytes: Callable[[int], None] | None) -> ScaleCount:
    """Stream one tensor's bytes in chunks of whole rows and count what they hold."""
    count = ScaleCount(info.name, info.file)
    row_w = rowpacked_width(head_dim)
    unit = {ROWPACKED: row_w, BLOCK_SCALES: max(1, scales_width(head_dim))}.get(what, max(1, head_dim))
    step = max(unit, chunk_bytes // unit * unit)
    row0 = done = 0
    with open_inside(ckpt.root, info.file) as handle:
        size = min(info.nbytes, max(0, os.fstat(handle.fileno()).st_size - info.start))
        handle.seek(info.start)
        while done < size:
            chunk = handle.read(min(step, size - done))
            if not chunk:
                break
            done += len(chunk)
            result.bytes_read += len(chunk)
            rows_here = len(chunk) // unit
            if what == FP8_VALUES:
                _count_fp8(count, chunk, row0, unit)
            elif what == ROWPACKED:
                columns = [chunk[c::row_w][:rows_here] for c in range(codes_width(head_dim), row_w)]
                _count_scales(count, columns, row0, 1)
            else:
                _count_scales(count, [chunk], row0, unit)
            row0 += rows_here
            if on_bytes is not None:
                on_bytes(len(chunk))
    return count


def _tally(result: ScanResult, what: str, info: TensorInfo, count: ScaleCount) -> None:
    """Add one tensor's counts to the totals, with a problem for each kind of bad byte."""
    if what == FP8_VALUES:
        result.fp8_values += count.values
        result.nan_fp8_values += count.nan
        findings = [("nan_values", count.nan, "NaN FP8 values (0x7F/0xFF)", count.first_nan_row,
                     "finite values")]
    else:
        result.block_scales += count.values
        result.nan_block_scales += count.nan
        result.negative_block_scales += count.negative
        result.negative_zero_block_scales += count.negative_zero
        findings = [
            ("nan_scales", count.nan, "NaN block scales (E4M3 0x7F/0xFF)", count.first_nan_row,
             "finite non-negative E4M3 scales"),
            ("negative_scales", count.negative, "negative block scales", count.first_negative_row,
             "non-negative E4M3 scales"),
        ]
    result.problems += [
        Problem(code, f"{n} {what_is}, first in row {row}", info.name, expected, info.file)
        for code, n, what_is, row, expected in findings
        if n
    ]
    if count.nan or count.negative or count.negative_zero:
        result.per_tensor.append(count)


def _read_scalar(ckpt: Checkpoint, g: TensorInfo) -> float | None:
    try:
        with open_inside(ckpt.root, g.file) as handle:
            handle.seek(g.start)
            raw = handle.read(g.nbytes)
        return decode_scalar(raw, g.dtype) if g.numel == 1 else None
    except (OSError, ValueError, struct.error):
        return None


def _check_global_scales(ckpt: Checkpoint, table: TableReport, result: ScanResult) -> None:
    """Each global scale finite and positive, and one value for the whole table."""
    values: list[float] = []
    for g in table.global_scales:
        value = _read_scalar(ckpt, g)
        result.global_scales.append({"tensor": g.name, "dtype": g.dtype, "value": value})
        if value is None:
            continue
        values.append(value)
        if not math.isfinite(value) or value <= 0:
            result.bad_global_scales += 1
            result.problems.append(
                Problem("global_scale_value", f"global scale is {value!r}", g.name,
                        "a finite positive value", g.file)
            )
    finite = [v for v in values if math.isfinite(v)]
    if len(set(finite)) > 1:
        result.problems.append(
            Problem("global_scale_value", f"the table's global scales differ: {sorted(set(finite))}",
                    table.prefix, "one value for the whole table")
        )


def scan_tables(
    ckpt: Checkpoint,
    tables: list[TableReport],
    on_bytes: Callable[[int], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> ScanResult:
    """Stream the PLE data and count NaN / negative E4M3 block scales and bad global scales.

    Memory stays bounded by ``chunk_bytes`` (plus a strided copy of the scale
    columns of one chunk).
    """
    result = ScanResult()
    for what, info, table in scan_plan(ckpt, tables):
        try:
            count = _scan_tensor(ckpt, what, info, table.head_dim or 0, chunk_bytes, result, on_bytes)
        except (OSError, ValueError) as exc:  # AccessError included: the file changed since its header was read
            result.problems.append(Problem("scan", f"cannot read its data: {exc}", info.name, file=info.file))
            continue
        _tally(result, what, info, count)
    for table in tables:
        _check_global_scales(ckpt, table, result)
    return result

"""Host memory: what each rank pins for its share of the PLE tables, against this host's memory."""

from __future__ import annotations

import os
from typing import Any

from .layout import LAYOUT_FP8, row_bytes
from .problem import Problem
from .table import TableReport

GIB = 1024**3


def gib(nbytes: int | None) -> str:
    """Bytes for people: GiB with two decimals (MiB/KiB/B below one GiB)."""
    if nbytes is None:
        return "?"
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def read_meminfo(path: str | os.PathLike[str] = "/proc/meminfo") -> dict[str, int]:
    """MemTotal / MemAvailable (and the rest) in bytes; {} when unreadable."""
    out: dict[str, int] = {}
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                fields = rest.split()
                if fields and fields[0].isdigit():
                    scale = 1024 if len(fields) > 1 and fields[1].lower() == "kb" else 1
                    out[key.strip()] = int(fields[0]) * scale
    except OSError:
        return {}
    return out


def host_memory(tables: list[TableReport], tp: int, ranks_per_host: int,
                meminfo_path: str) -> tuple[dict[str, Any], list[Problem], list[Problem]]:
    """(the report's ``memory`` object, problems, warnings) for ``tp`` ranks, ``ranks_per_host`` here."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    per_rank = 0
    fp8_per_rank = 0
    rows_per_rank = 0
    for t in tables:
        if not t.head_dim:
            continue
        rows = -(-t.rows // tp)
        rows_per_rank += rows
        per_rank += rows * (t.row_bytes or 0)
        fp8_per_rank += rows * row_bytes(LAYOUT_FP8, t.head_dim)
    host = per_rank * ranks_per_host
    info = read_meminfo(meminfo_path)
    available, total = info.get("MemAvailable"), info.get("MemTotal")
    fits = None if available is None else host <= available
    memory = {
        "tp": tp,
        "ranks_per_host": ranks_per_host,
        "rows_per_rank": rows_per_rank,
        "bytes_per_rank": per_rank,
        "bytes_per_host": host,
        "fp8_bytes_per_rank": fp8_per_rank,
        "host_mem_available": available,
        "host_mem_total": total,
        "fits": fits,
    }
    if not tables:
        return memory, problems, warnings
    if available is None:
        warnings.append(Problem("memory", f"cannot read MemAvailable from {meminfo_path}: "
                                "the host memory check was skipped"))
    elif not fits:
        problems.append(
            Problem(
                "memory",
                f"{ranks_per_host} rank(s) on this host pin {gib(host)} of PLE table but only "
                f"{gib(available)} is available: free memory, or spread the ranks over more hosts "
                "(--ranks-per-host)",
                expected=f"MemAvailable >= {gib(host)}",
            )
        )
    elif total is not None and available - host < total // 4:
        warnings.append(
            Problem(
                "memory",
                f"pinning {gib(host)} leaves {gib(available - host)} available, under a quarter of "
                f"the host's {gib(total)} for the engine processes and checkpoint loading",
            )
        )
    return memory, problems, warnings

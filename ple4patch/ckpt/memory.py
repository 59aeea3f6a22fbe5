"""Host memory: what each rank pins for its share of the PLE tables (within a host budget), against
this host's memory."""

from __future__ import annotations

import os
from typing import Any, Mapping

from .layout import LAYOUT_FP8, row_bytes
from .placement import (GIB, HOST_BUDGET_ENV, PAGE_BYTES, PIN_PAGE, PIN_POWER_OF_TWO, Placement, host_reserve,
                        host_share, place_rows)
from .problem import Problem
from .table import TableReport


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


# Stock 1Cat-vLLM places an FP8 table itself, VRAM first, when no host budget is set:
# 1CatAI/1Cat-vLLM 036318a0 vllm/models/qwen4_exp/nvidia/ple_layer.py,
# Qwen4ExpPinnedHostEmbedding (docstring: rows that fit beside the weights, the KV cache and a
# reserve "stay in device memory, only the remainder goes to pinned host memory") and
# `_resolve_host_budget` (auto_ple_host_budget_bytes from torch.cuda.mem_get_info, then
# cap_host_budget_bytes: the fair share is a cap); 15a8d185 the same through
# `_device_spill_bytes`. VLLM_SM70_QWEN38_HYBRID_PLE sends the whole table to the host instead
# (capped the same way). So without a budget, an FP8 table's host rows there are at most the
# figures: what the GPU has room for is known only on the GPU at start-up.
UPPER_BOUND_WHY = ("the engine keeps the FP8 rows that fit beside the weights and the KV cache in VRAM "
                   "first and pins only the rest (measured on the GPU at start-up)")
_HYBRID_ENV = "VLLM_SM70_QWEN38_HYBRID_PLE"


def fp8_host_is_upper_bound(tables: list[TableReport], rule: str | None, budget: int | None,
                            environ: Mapping[str, str] | None) -> bool:
    """Whether the host rows of these tables are an upper bound: every table FP8, on a release
    that derives the host budget (``rule`` "fair_share"), with no budget set and no hybrid PLE."""
    env = os.environ if environ is None else environ
    hybrid = env.get(_HYBRID_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return (bool(tables) and all(t.layout == LAYOUT_FP8 for t in tables) and rule == "fair_share"
            and budget is None and not hybrid)


def host_memory(tables: list[TableReport], tp: int, ranks_per_host: int, meminfo_path: str,
                budget: int | None = None, budget_source: str | None = None,
                environ: Mapping[str, str] | None = None,
                rule: str | None = None,
                fp8_pinned_by: str = PIN_POWER_OF_TWO) -> tuple[dict[str, Any], list[Problem], list[Problem]]:
    """(the report's ``memory`` object, problems, warnings) for ``tp`` ranks, ``ranks_per_host`` here.

    ``budget``: the host budget per rank in bytes (None: none, the whole share in host memory).
    ``rule``: how the engine's patched loader places the table (``venv_engine.host_budget_rule``;
    None: not known, no engine given). With ``"fair_share"`` and no budget, each rank keeps its
    fair share of host memory, min(share, max(0, MemAvailable - reserve) // ranks), and the
    rest goes to VRAM, as the loader does; with ``"none"`` a budget is ignored, as the loader does.
    ``fp8_pinned_by``: how the engine pins an FP8 table's host rows (``placement.PIN_POWER_OF_TWO``,
    torch's caching host allocator, as stock 1Cat-vLLM; ``PIN_PAGE`` where the release registers
    them exactly: ``venv_engine.fp8_pin_rule``); an NVFP4 table is pinned to the page.
    """
    problems: list[Problem] = []
    warnings: list[Problem] = []
    upper_bound = fp8_host_is_upper_bound(tables, rule, budget, environ)
    info = read_meminfo(meminfo_path)
    available, total = info.get("MemAvailable"), info.get("MemTotal")
    if rule == "none" and budget is not None:
        warnings.append(Problem(
            "host_budget", f"this engine release has no PLE host budget: {budget_source} is ignored and "
            "the whole share stays in host memory"))
        budget, budget_source = None, None
    derived = rule == "fair_share" and budget is None and available is not None and total is not None
    if derived:
        reserve = host_reserve(total, environ)
        budget = host_share(available, reserve, ranks_per_host)
        budget_source = (f"fair share: {gib(available)} available, {gib(reserve)} kept in reserve, "
                         f"{ranks_per_host} rank(s)")
    share = fp8_share = rows_per_rank = 0
    placed: list[tuple[TableReport, Placement]] = []
    for t in tables:
        if not t.head_dim or not t.row_bytes:
            continue
        rows = -(-t.rows // tp)
        rows_per_rank += rows
        share += rows * t.row_bytes
        fp8_share += rows * row_bytes(LAYOUT_FP8, t.head_dim)
        pinned_by = fp8_pinned_by if t.layout == LAYOUT_FP8 else PIN_PAGE
        placed.append((t, place_rows(rows, t.row_bytes, budget, pinned_by)))
    pinned = sum(p.pinned_bytes for _, p in placed)
    host = pinned * ranks_per_host
    vram_rows = sum(p.vram_rows for _, p in placed)
    if derived and vram_rows and not upper_bound:
        warnings.append(Problem(
            "host_budget",
            f"no host budget is set, so each rank keeps its {budget_source} ({gib(budget)}) of the table "
            f"in host memory and puts {vram_rows:,} rows ({gib(sum(p.vram_bytes for _, p in placed))}) "
            f"in VRAM: check that they fit beside the KV cache, or choose with {HOST_BUDGET_ENV}"))
    fits = None if available is None else host <= available
    memory = {
        "tp": tp,
        "ranks_per_host": ranks_per_host,
        "rows_per_rank": rows_per_rank,
        "bytes_per_rank": share,
        "bytes_per_host": share * ranks_per_host,
        "fp8_bytes_per_rank": fp8_share,
        "host_budget_bytes": budget,
        "host_budget_source": budget_source,
        "host_rows_per_rank": sum(p.host_rows for _, p in placed),
        "vram_rows_per_rank": sum(p.vram_rows for _, p in placed),
        "host_bytes_per_rank": sum(p.host_bytes for _, p in placed),
        "pinned_bytes_per_rank": pinned,
        "pinned_bytes_per_host": host,
        "vram_bytes_per_rank": sum(p.vram_bytes for _, p in placed),
        "page_bytes": PAGE_BYTES,
        "per_table": [
            {"layer": t.layer, "ple_layer_id": t.ple_layer_id, "rows_per_rank": p.rows, "row_bytes": p.row_bytes, "host_rows": p.host_rows,
             "vram_rows": p.vram_rows, "pinned_bytes": p.pinned_bytes, "pinned_by": p.pinned_by,
             "vram_bytes": p.vram_bytes}
            for t, p in placed
        ],
        "host_mem_available": available,
        "host_mem_total": total,
        "fits": fits,
        "host_rows_upper_bound": upper_bound,
    }
    if not tables:
        return memory, problems, warnings
    if available is None:
        warnings.append(Problem("memory", f"cannot read MemAvailable from {meminfo_path}: "
                                "the host memory check was skipped"))
    elif not fits and upper_bound:
        warnings.append(
            Problem(
                "memory",
                f"{ranks_per_host} rank(s) on this host pin up to {gib(host)} of PLE table and "
                f"{gib(available)} is available: {UPPER_BOUND_WHY}; if the GPUs have no room for it, free "
                f"memory, spread the ranks over more hosts (--ranks-per-host), or choose with {HOST_BUDGET_ENV}",
                expected=f"MemAvailable >= {gib(host)}",
            )
        )
    elif not fits:
        problems.append(
            Problem(
                "memory",
                f"{ranks_per_host} rank(s) on this host pin {gib(host)} of PLE table but only "
                f"{gib(available)} is available: free memory, or spread the ranks over more hosts "
                f"(--ranks-per-host), or send rows to VRAM with a host budget ({HOST_BUDGET_ENV})",
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
    if budget and not derived and available is not None and total is not None:
        reserve = host_reserve(total, environ)
        fair = host_share(available, reserve, ranks_per_host)
        if budget > fair:
            warnings.append(
                Problem(
                    "host_budget",
                    f"the host budget of {gib(budget)} per rank ({budget_source}) is more than each of the "
                    f"{ranks_per_host} rank(s) on this host may pin, {gib(fair)} ({gib(available)} available, "
                    f"{gib(reserve)} kept in reserve): engine releases with check_ple_host_share refuse "
                    f"to start; lower {HOST_BUDGET_ENV}",
                    expected=f"{HOST_BUDGET_ENV} <= {fair / GIB:.2f}",
                )
            )
    return memory, problems, warnings

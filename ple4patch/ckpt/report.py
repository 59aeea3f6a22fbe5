"""The inspect report: its verdict, its JSON object and its text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..columns import WIDTH, fit_lines
from ..errors import CheckpointProblem
from .files import Checkpoint
from .layout import LAYOUT_FP8, SHARD_GLOBAL_SCALE, STOCK_ENGINE_READS, TABLE_FP8_SCALE, TABLE_GLOBAL_SCALE
from .memory import UPPER_BOUND_WHY, gib
from .placement import PIN_POWER_OF_TWO
from .problem import Problem
from .scan import ScanResult
from .table import TableReport
from .venv_engine import MADE_STATES, UNKNOWN_READS

SCHEMA_VERSION = 1
MAX_TEXT_PROBLEMS = 20  # the text report lists this many; --json lists all


NOT_PLE_VERDICT = "no PLE table: not a Qwen3.8-Flash-Next checkpoint; ple4patch changes nothing for it"


def _plural(n: int) -> str:
    return f"{n} problem{'s' if n != 1 else ''}"


@dataclass
class InspectReport:
    checkpoint: Path
    tp: int
    ranks_per_host: int
    ckpt: Checkpoint
    tables: list[TableReport]
    memory: dict[str, Any]
    engine: dict[str, Any] | None
    scan: ScanResult | None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    ple_table: bool = True  # False: a checkpoint of another model (no PLE table, no PLE key in config.json)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        if self.problems:
            return f"WILL NOT LOAD: {_plural(len(self.problems))} (listed above)"
        if not self.ple_table:
            return NOT_PLE_VERDICT
        layouts = {t.layout for t in self.tables}
        if self.engine is not None:
            return f"OK: will load with the engine in {self.engine['venv']} ({self.engine['state']})"
        if layouts <= set(STOCK_ENGINE_READS):
            return "OK: will load with the stock or the patched engine"
        return "OK: will load once the engine is patched (`ple4patch apply` on the engine's venv)"

    def to_json(self) -> dict[str, Any]:
        cfg = self.ckpt.config
        return {
            "schema_version": SCHEMA_VERSION,
            "checkpoint": str(self.checkpoint),
            "ok": self.ok,
            "verdict": self.verdict,
            "config": {
                "text_config": bool(cfg.text_key),
                "ple_embedding_dtype": cfg.dtype,
                "ple_embedding_dtype_source": cfg.dtype_source,
                "ple_embedding_layout": cfg.dtype_layout,
                "ple_layer_ids": cfg.get("ple_layer_ids"),
                "head_dim": cfg.head_dim,
                "split_ngram_parts": cfg.split_ngram_parts,
                "split_ngram_parts_default": cfg.split_ngram_parts_default,
            },
            "files": {
                "index": self.ckpt.index_file,
                "count": len(self.ckpt.files),
                "tensors": len(self.ckpt.tensors),
                "bytes": sum(f.size for f in self.ckpt.files.values()),
            },
            "tables": [t.to_json() for t in self.tables],
            "memory": self.memory,
            "engine": self.engine,
            "scan": self.scan.to_json() if self.scan is not None else None,
            "problems": [p.to_json() for p in self.problems],
            "warnings": [p.to_json() for p in self.warnings],
        }

    def raise_for_problems(self) -> None:
        """CheckpointProblem (exit 10) when the checkpoint will not load as it is."""
        if self.problems:
            raise CheckpointProblem(
                f"{self.checkpoint}: {_plural(len(self.problems))}; first: {self.problems[0].line()}"
            )


def _table_lines(t: TableReport) -> list[str]:
    rb = t.row_bytes
    shards = f"{len(t.shards_present)}/{t.parts} shards"
    scale = {"table": f"{TABLE_GLOBAL_SCALE if t.layout != LAYOUT_FP8 else TABLE_FP8_SCALE}",
             "per_shard": f"shard_<i>.{SHARD_GLOBAL_SCALE}",
             "table+per_shard": f"{TABLE_GLOBAL_SCALE} + shard_<i>.{SHARD_GLOBAL_SCALE}"}.get(
        t.global_scale or "", "MISSING")
    return [
        f"table       PLE layer {t.ple_layer_id}: {t.layout}, {t.rows:,} rows x {rb if rb else '?'} B, "
        f"{shards}, global scale {scale}, {gib(t.disk_bytes)} on disk",
        f"            {t.prefix}.* (ple_layer_ids counts layers from 1, tensor names from 0)",
    ]


def _power_of_two(m: dict[str, Any]) -> bool:
    """Whether a table's host rows are pinned through torch's caching host allocator (FP8)."""
    return any(t.get("pinned_by") == PIN_POWER_OF_TWO and t["host_rows"] for t in m.get("per_table", ()))


TP_NOT_GIVEN = "--tp not given: pass --tp N for N GPUs"


def _memory_lines(m: dict[str, Any]) -> list[str]:
    per_host = f"{m['ranks_per_host']} rank(s) on this host"
    tp = f"TP{m['tp']}" + ("" if m.get("tp_given", True) else f" ({TP_NOT_GIVEN})")
    if m["host_budget_bytes"] is None:
        compare = ""
        if m["fp8_bytes_per_rank"] != m["bytes_per_rank"]:
            compare = f" (as FP8: {gib(m['fp8_bytes_per_rank'])})"
        how = (f"{m['pinned_bytes_per_rank']:,} B pinned per rank (torch's pinned allocator rounds the FP8 "
               f"table's {m['host_bytes_per_rank']:,} B up to a power of two)" if _power_of_two(m) else
               f"exactly {m['pinned_bytes_per_rank']:,} B per rank (rows x row bytes, up to a {m['page_bytes']} B page)")
        lines = [
            f"pinned      {tp}: {m['rows_per_rank']:,} rows, {gib(m['bytes_per_rank'])} per rank"
            f"{compare}; {gib(m['bytes_per_host'])} for {per_host}",
            f"            {how}, {m['pinned_bytes_per_host']:,} B for {per_host}; no host budget: "
            + (f"at most all rows in host memory ({UPPER_BOUND_WHY})" if m.get("host_rows_upper_bound")
               else "all rows in host memory"),
        ]
    elif m.get("host_rows_upper_bound"):  # FP8 on a release that keeps rows in VRAM first
        lines = [
            f"pinned      {tp}: up to {m['host_rows_per_rank']:,} of {m['rows_per_rank']:,} rows per rank in host "
            f"memory, up to {gib(m['pinned_bytes_per_rank'])} ({m['pinned_bytes_per_rank']:,} B) per rank; up to "
            f"{gib(m['pinned_bytes_per_host'])} ({m['pinned_bytes_per_host']:,} B) for {per_host}",
            f"vram        {UPPER_BOUND_WHY}; at most the host budget {gib(m['host_budget_bytes'])} per rank "
            f"({m['host_budget_source']}) goes to host memory",
        ]
        if _power_of_two(m):
            lines.insert(1, f"            torch's pinned allocator rounds the FP8 table's host rows (up to "
                         f"{m['host_bytes_per_rank']:,} B) up to a power of two")
    else:
        lines = [
            f"pinned      {tp}: {m['host_rows_per_rank']:,} of {m['rows_per_rank']:,} rows per rank in host "
            f"memory, {gib(m['pinned_bytes_per_rank'])} ({m['pinned_bytes_per_rank']:,} B) per rank; "
            f"{gib(m['pinned_bytes_per_host'])} ({m['pinned_bytes_per_host']:,} B) for {per_host}",
            f"vram        {m['vram_rows_per_rank']:,} rows per rank in GPU memory, {gib(m['vram_bytes_per_rank'])} "
            f"({m['vram_bytes_per_rank']:,} B); host budget {gib(m['host_budget_bytes'])} per rank "
            f"({m['host_budget_source']})",
        ]
        if _power_of_two(m):
            lines.insert(1, f"            torch's pinned allocator rounds the FP8 table's "
                         f"{m['host_bytes_per_rank']:,} B of host rows up to a power of two")
    if m["host_mem_available"] is not None:
        verdict = "fits" if m["fits"] else "DOES NOT FIT"
        if m.get("host_rows_upper_bound"):
            verdict = "fits" if m["fits"] else "the most it may pin DOES NOT FIT (see warnings)"
        lines.append(f"host        MemAvailable {gib(m['host_mem_available'])} of {gib(m['host_mem_total'])}: {verdict}")
    return lines


def _engine_lines(e: dict[str, Any]) -> list[str]:
    """The engine line: its PLE layer's state (what it reads), the patch set's where the set has
    more files, and the set's next step (`ple4patch status`'s) when the engine cannot read the
    table, or reads it with the rest of its set not patched with the layer."""
    pid = f", patch {e['patch_id']}" if e["patch_id"] else ""
    files = e.get("set_files") or []
    of_set = f" (set of {len(files)} files: {e['set_state']})" if len(files) > 1 else ""
    head = f"engine      1cat-vllm {e['version']} in {e['venv']}: {e['state']}{pid}{of_set}; "
    if not e["reads"]:
        line = f"{head}reads: not known ({UNKNOWN_READS})"
    else:
        can = {True: "reads this layout", False: "CANNOT read this layout", None: "-"}[e["can_read"]]
        line = f"{head}reads {', '.join(e['reads'])}: {can}"
    step = e.get("next_step")
    due = e["can_read"] is False or (e["state"] in MADE_STATES and e.get("set_state") != "patched")
    return [line] + ([f"            next: {step}"] if step and due else [])


def _scan_line(s: ScanResult) -> str:
    parts = [f"{gib(s.bytes_read)} read"]
    if s.block_scales:
        parts.append(
            f"{s.block_scales:,} block scales: {s.nan_block_scales} NaN, {s.negative_block_scales} negative, "
            f"{s.negative_zero_block_scales} -0"
        )
    if s.fp8_values:
        parts.append(f"{s.fp8_values:,} FP8 values: {s.nan_fp8_values} NaN")
    globals_txt = ", ".join(
        f"{g['value']:.6g}" if isinstance(g["value"], float) and math.isfinite(g["value"]) else str(g["value"])
        for g in s.global_scales[:4]
    )
    more = f" (+{len(s.global_scales) - 4})" if len(s.global_scales) > 4 else ""
    parts.append(f"global scale(s) {globals_txt or 'none'}{more}: {s.bad_global_scales} bad")
    return "scan        " + "; ".join(parts)


def render_body(report: InspectReport) -> str:
    """The text report without its verdict line, within 100 columns."""
    return fit_lines(body_lines(report))


def body_lines(report: InspectReport) -> list[tuple[str, int]]:
    """The text report's lines without its verdict, each with the indent of its continuation."""
    cfg = report.ckpt.config
    files = report.ckpt.files
    size = sum(f.size for f in files.values())
    via = f" via {report.ckpt.index_file}" if report.ckpt.index_file else ""
    dtype = f"{cfg.dtype!r} ({cfg.dtype_source})" if cfg.dtype else "not set"
    parts = f"{cfg.split_ngram_parts}" + (" (default: not in config)" if cfg.split_ngram_parts_default else "")
    head_dim = cfg.head_dim if cfg.head_dim is not None else "unknown (needs ple_embed_dim, ngram_size, heads_per_ngram)"
    tensors = len(report.ckpt.tensors)
    lines = [
        f"checkpoint  {report.checkpoint}",
        f"            {len(files)} safetensors file(s){via}, {tensors} tensor{'s' if tensors != 1 else ''}, {gib(size)}",
    ]
    if report.ple_table:
        lines.append(f"config      ple_embedding_dtype {dtype}; head_dim {head_dim}; split_ngram_parts {parts}")
    for t in report.tables:
        lines += _table_lines(t)
    if report.tables:
        lines += _memory_lines(report.memory)
    if report.engine is not None:
        lines += _engine_lines(report.engine)
    if report.scan is not None:
        lines.append(_scan_line(report.scan))
    if report.warnings:
        lines.append("warnings")
        lines += [f"  - {w.line()}" for w in report.warnings]
    if report.problems:
        lines.append("problems")
        lines += [f"  - {p.line()}" for p in report.problems[:MAX_TEXT_PROBLEMS]]
        if len(report.problems) > MAX_TEXT_PROBLEMS:
            lines.append(f"  ... and {len(report.problems) - MAX_TEXT_PROBLEMS} more (--json lists all)")
    return [(line, hang_of(line)) for line in lines]


TEXT_WIDTH = WIDTH  # text lines fit this many columns


def hang_of(line: str) -> int:
    """Where a report line's continuation lines start: under its list item's text (`  - `) or
    under its value's column (12)."""
    return 4 if line.startswith("  - ") else 12


def render_text(report: InspectReport) -> str:
    """The whole text report, its verdict last."""
    return f"{render_body(report)}\nverdict     {report.verdict}"

"""``ple4patch inspect``: will this checkpoint load with the patched engine, and what will it pin?

Builds a report from :mod:`ple4patch.checkpoint` (headers only, plus the PLE
bytes with ``scan``), the host's memory and, with a venv, the state of that
venv's engine; renders it as text or JSON. No torch, no numpy, no libcst.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checkpoint as ck
from .errors import CheckpointProblem, Ple4Error, UsageError

SCHEMA_VERSION = 1
GIB = 1024**3
MAX_TEXT_PROBLEMS = 20  # the text report lists this many; --json lists all


def gib(nbytes: int | None) -> str:
    """Bytes for people: GiB with two decimals (MiB/KiB/B below one GiB)."""
    if nbytes is None:
        return "?"
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


@dataclass
class InspectReport:
    checkpoint: Path
    tp: int
    ranks_per_host: int
    ckpt: ck.Checkpoint
    tables: list[ck.TableReport]
    memory: dict[str, Any]
    engine: dict[str, Any] | None
    scan: ck.ScanResult | None
    problems: list[ck.Problem] = field(default_factory=list)
    warnings: list[ck.Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        if self.problems:
            n = len(self.problems)
            return f"WILL NOT LOAD: {n} problem{'s' if n != 1 else ''} (listed above)"
        layouts = {t.layout for t in self.tables}
        if self.engine is not None:
            return f"OK: will load with the engine in {self.engine['venv']} ({self.engine['state']})"
        if layouts <= set(ck.STOCK_ENGINE_READS):
            return "OK: will load with the stock or the patched engine"
        return "OK: will load with the patched engine (ple4patch apply VENV)"

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
            n = len(self.problems)
            raise CheckpointProblem(
                f"{self.checkpoint}: {n} problem{'s' if n != 1 else ''}; first: {self.problems[0].line()}"
            )


def _memory(tables: list[ck.TableReport], tp: int, ranks_per_host: int, meminfo_path: str) -> tuple[dict, list, list]:
    problems: list[ck.Problem] = []
    warnings: list[ck.Problem] = []
    per_rank = 0
    fp8_per_rank = 0
    rows_per_rank = 0
    for t in tables:
        if not t.head_dim:
            continue
        rows = -(-t.rows // tp)
        rows_per_rank += rows
        per_rank += rows * (t.row_bytes or 0)
        fp8_per_rank += rows * ck.row_bytes(ck.LAYOUT_FP8, t.head_dim)
    host = per_rank * ranks_per_host
    info = ck.read_meminfo(meminfo_path)
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
        warnings.append(ck.Problem("memory", f"cannot read MemAvailable from {meminfo_path}: "
                                   "the host memory check was skipped"))
    elif not fits:
        problems.append(
            ck.Problem(
                "memory",
                f"{ranks_per_host} rank(s) on this host pin {gib(host)} of PLE table but only "
                f"{gib(available)} is available: free memory, or spread the ranks over more hosts "
                "(--ranks-per-host)",
                expected=f"MemAvailable >= {gib(host)}",
            )
        )
    elif total is not None and available - host < total // 4:
        warnings.append(
            ck.Problem(
                "memory",
                f"pinning {gib(host)} leaves {gib(available - host)} available, under a quarter of "
                f"the host's {gib(total)} for the engine processes and checkpoint loading",
            )
        )
    return memory, problems, warnings


def _engine(venv: str | os.PathLike[str], tables: list[ck.TableReport]) -> tuple[dict, list, list]:
    """The venv's engine state and the layouts it reads. EngineNotFound propagates (exit 3)."""
    from . import engine as engine_mod
    from .sentinel import find_patch_id

    eng = engine_mod.find_engine(venv)
    eng.require_target()
    state = None
    patch_id = None
    how = "state.assess"
    try:
        from . import manifest, state as state_mod

        assessment = state_mod.assess(eng, manifest.with_local(manifest.load(), eng.target))
        state = assessment.state.value
        patch_id = assessment.patch_id
        if patch_id is None and assessment.current_bytes is not None:
            patch_id = find_patch_id(assessment.current_bytes.decode("utf-8", errors="replace"))
    except Ple4Error:  # e.g. an unreadable manifest: fall back to the sentinel alone
        how = "sentinel"
        try:
            text = eng.target.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(f"cannot read {eng.target}: {exc.strerror or exc}") from None
        patch_id = find_patch_id(text)
        state = "patched" if patch_id else "unpatched"
    reads = list(ck.PATCHED_ENGINE_READS if patch_id else ck.STOCK_ENGINE_READS)
    problems: list[ck.Problem] = []
    warnings: list[ck.Problem] = []
    layouts = sorted({t.layout for t in tables})
    can_read = all(layout in reads for layout in layouts) if layouts else None
    for layout in layouts:
        if layout in reads or layout not in ck.PATCHED_ENGINE_READS:
            continue  # unreadable layouts are reported by the table checks already
        problems.append(
            ck.Problem(
                "engine",
                f"the engine in {eng.venv} is not patched ({state}) and reads only "
                f"{', '.join(reads)}: run `ple4patch apply {eng.venv}`",
                file=str(eng.target),
                expected=f"an engine that reads {layout}",
            )
        )
    if state == "patched_older":
        warnings.append(
            ck.Problem("engine", f"the engine is patched by an older ple4patch ({patch_id}): "
                       f"`ple4patch apply {eng.venv}` updates it", file=str(eng.target))
        )
    info = {
        "venv": str(eng.venv),
        "version": eng.version,
        "target": str(eng.target),
        "state": state,
        "patch_id": patch_id,
        "state_from": how,
        "reads": reads,
        "can_read": can_read,
    }
    return info, problems, warnings


def inspect_checkpoint(
    checkpoint: str | os.PathLike[str],
    *,
    tp: int = 1,
    ranks_per_host: int | None = None,
    venv: str | os.PathLike[str] | None = None,
    scan: bool = False,
    progress: bool = False,
    meminfo_path: str = "/proc/meminfo",
    chunk_bytes: int = ck.CHUNK_BYTES,
) -> InspectReport:
    """Inspect a checkpoint directory. Usage errors raise; findings go into the report."""
    root = Path(checkpoint)
    if not root.is_dir():
        raise UsageError(f"no such checkpoint directory: {root}")
    if not (root / ck.CONFIG_FILE).is_file():
        raise UsageError(
            f"no {ck.CONFIG_FILE} in {root}: pass the checkpoint directory (the one holding "
            f"{ck.CONFIG_FILE} and {ck.INDEX_FILE})"
        )
    if tp < 1:
        raise UsageError(f"--tp must be at least 1, got {tp}")
    ranks = tp if ranks_per_host is None else ranks_per_host
    if ranks < 1 or ranks > tp:
        raise UsageError(f"--ranks-per-host must be between 1 and --tp ({tp}), got {ranks}")
    try:
        raw = ck.load_config(root)
    except ValueError as exc:
        raise CheckpointProblem(f"{exc}: fetch config.json again") from None

    engine_info = engine_problems = engine_warnings = None
    ckpt = ck.load_checkpoint(root, raw)
    tables = ck.check_tables(ckpt)
    if venv is not None:
        engine_info, engine_problems, engine_warnings = _engine(venv, tables)

    problems = list(ckpt.config.problems) + list(ckpt.problems)
    warnings: list[ck.Problem] = []
    problems += ck.missing_tables(ckpt, tables)
    for t in tables:
        problems += t.problems
        warnings += t.warnings
    memory, mem_problems, mem_warnings = _memory(tables, tp, ranks, meminfo_path)
    problems += mem_problems
    warnings += mem_warnings
    if engine_problems:
        problems += engine_problems
    if engine_warnings:
        warnings += engine_warnings

    scan_result = None
    if scan:
        plan_bytes = ck.scan_bytes(ck.scan_plan(ckpt, tables))
        if progress and sys.stderr.isatty():
            import click

            with click.progressbar(length=plan_bytes, label="scanning PLE data", file=sys.stderr,
                                   show_pos=False, show_percent=True, show_eta=True) as bar:
                scan_result = ck.scan_tables(ckpt, tables, on_bytes=bar.update, chunk_bytes=chunk_bytes)
        else:
            scan_result = ck.scan_tables(ckpt, tables, chunk_bytes=chunk_bytes)
        problems += scan_result.problems

    return InspectReport(root, tp, ranks, ckpt, tables, memory, engine_info, scan_result, problems, warnings)


# ---------------------------------------------------------------------------
# Text rendering
# ---------------------------------------------------------------------------


def render_text(report: InspectReport) -> str:
    cfg = report.ckpt.config
    lines: list[str] = []
    files = report.ckpt.files
    size = sum(f.size for f in files.values())
    via = f" via {report.ckpt.index_file}" if report.ckpt.index_file else ""
    lines.append(f"checkpoint  {report.checkpoint}")
    lines.append(f"            {len(files)} safetensors file(s){via}, {len(report.ckpt.tensors)} tensors, {gib(size)}")
    dtype = f"{cfg.dtype!r} ({cfg.dtype_source})" if cfg.dtype else "not set"
    parts = f"{cfg.split_ngram_parts}" + (" (default: not in config)" if cfg.split_ngram_parts_default else "")
    lines.append(f"config      ple_embedding_dtype {dtype}; head_dim {cfg.head_dim}; split_ngram_parts {parts}")
    for t in report.tables:
        rb = t.row_bytes
        shards = f"{len(t.shards_present)}/{t.parts} shards"
        scale = {"table": f"{ck.TABLE_GLOBAL_SCALE if t.layout != ck.LAYOUT_FP8 else ck.TABLE_FP8_SCALE}",
                 "per_shard": f"shard_<i>.{ck.SHARD_GLOBAL_SCALE}",
                 "table+per_shard": f"{ck.TABLE_GLOBAL_SCALE} + shard_<i>.{ck.SHARD_GLOBAL_SCALE}"}.get(
            t.global_scale or "", "MISSING")
        lines.append(
            f"table       layer {t.layer}: {t.layout}, {t.rows:,} rows x {rb if rb else '?'} B, "
            f"{shards}, global scale {scale}, {gib(t.disk_bytes)} on disk"
        )
        lines.append(f"            {t.prefix}.*")
    m = report.memory
    if report.tables:
        compare = ""
        if m["fp8_bytes_per_rank"] != m["bytes_per_rank"]:
            compare = f" (as FP8: {gib(m['fp8_bytes_per_rank'])})"
        lines.append(
            f"pinned      TP{m['tp']}: {m['rows_per_rank']:,} rows, {gib(m['bytes_per_rank'])} per rank"
            f"{compare}; {gib(m['bytes_per_host'])} for {m['ranks_per_host']} rank(s) on this host"
        )
        if m["host_mem_available"] is not None:
            verdict = "fits" if m["fits"] else "DOES NOT FIT"
            lines.append(
                f"host        MemAvailable {gib(m['host_mem_available'])} of {gib(m['host_mem_total'])}: {verdict}"
            )
    if report.engine is not None:
        e = report.engine
        pid = f", patch {e['patch_id']}" if e["patch_id"] else ""
        can = {True: "reads this layout", False: "CANNOT read this layout", None: "-"}[e["can_read"]]
        lines.append(f"engine      1cat-vllm {e['version']} in {e['venv']}: {e['state']}{pid}; "
                     f"reads {', '.join(e['reads'])}: {can}")
    if report.scan is not None:
        s = report.scan
        parts_txt = [f"{gib(s.bytes_read)} read"]
        if s.block_scales:
            parts_txt.append(
                f"{s.block_scales:,} block scales: {s.nan_block_scales} NaN, {s.negative_block_scales} negative, "
                f"{s.negative_zero_block_scales} -0"
            )
        if s.fp8_values:
            parts_txt.append(f"{s.fp8_values:,} FP8 values: {s.nan_fp8_values} NaN")
        globals_txt = ", ".join(
            f"{g['value']:.6g}" if isinstance(g["value"], float) and math.isfinite(g["value"]) else str(g["value"])
            for g in s.global_scales[:4]
        )
        more = f" (+{len(s.global_scales) - 4})" if len(s.global_scales) > 4 else ""
        parts_txt.append(f"global scale(s) {globals_txt or 'none'}{more}: {s.bad_global_scales} bad")
        lines.append("scan        " + "; ".join(parts_txt))
    if report.warnings:
        lines.append("warnings")
        lines += [f"  - {w.line()}" for w in report.warnings]
    if report.problems:
        lines.append("problems")
        lines += [f"  - {p.line()}" for p in report.problems[:MAX_TEXT_PROBLEMS]]
        if len(report.problems) > MAX_TEXT_PROBLEMS:
            lines.append(f"  ... and {len(report.problems) - MAX_TEXT_PROBLEMS} more (--json lists all)")
    lines.append(f"verdict     {report.verdict}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The action the CLI calls
# ---------------------------------------------------------------------------


def run(
    checkpoint: str | os.PathLike[str],
    *,
    tp: int = 1,
    ranks_per_host: int | None = None,
    venv: str | os.PathLike[str] | None = None,
    scan: bool = False,
    progress: bool = True,
    meminfo_path: str = "/proc/meminfo",
):
    """`ple4patch inspect` as an ``actions.Result``: exit 0 when it will load, 10 when not.

    Usage errors (no such directory, no config.json, bad --tp) and EngineNotFound
    (--venv without an engine) raise, and the CLI maps them to their exit codes.
    """
    from .result import Result
    from .errors import EXIT_OK

    report = inspect_checkpoint(
        checkpoint, tp=tp, ranks_per_host=ranks_per_host, venv=venv, scan=scan,
        progress=progress, meminfo_path=meminfo_path,
    )
    body = render_text(report).rpartition("\n")[0]  # the verdict becomes the message
    data = report.to_json()
    for key in ("schema_version", "ok"):  # Result.to_json writes these itself
        data.pop(key)
    return Result(
        command="inspect",
        exit_code=EXIT_OK if report.ok else CheckpointProblem.exit_code,
        message=report.verdict,
        data=data,
        output=body + "\n",
    )

"""``ple4patch inspect``: compose the readers and checks into a report, and run it as the command.

Will this checkpoint load with the patched engine, and what will it pin? No
torch, no numpy, no libcst: the answer comes in seconds on a host that has not
installed the kernels extra.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

from .. import shell
from ..errors import CheckpointProblem, UsageError
from .access import AccessError, exists
from .config import load_config
from .files import load_checkpoint
from .layout import CONFIG_FILE, INDEX_FILE
from .memory import host_memory
from .placement import PIN_POWER_OF_TWO, host_budget, host_reserve
from .problem import Problem
from .report import InspectReport, render_body
from .scan import CHUNK_BYTES, ScanResult, scan_bytes, scan_plan, scan_tables
from .tables import check_tables, missing_tables
from .venv_engine import venv_engine


def judge_set(eng) -> tuple:
    """(the engine's patch set assessed, its next step): what ``ple4patch status`` reports, from
    the same manifests (``set_report.next_step`` over ``fileset.assess_set``)."""
    from .. import manifest, set_report, write
    from ..fileset import assess_set

    s = assess_set(eng, write.with_local_pins(manifest.load(), eng))
    return s, set_report.next_step(s)


def _scan(ckpt, tables, progress: bool, chunk_bytes: int) -> ScanResult:
    if progress and sys.stderr.isatty():
        import click

        plan_bytes = scan_bytes(scan_plan(ckpt, tables))
        with click.progressbar(length=plan_bytes, label="scanning PLE data", file=sys.stderr,
                               show_pos=False, show_percent=True, show_eta=True) as bar:
            return scan_tables(ckpt, tables, on_bytes=bar.update, chunk_bytes=chunk_bytes)
    return scan_tables(ckpt, tables, chunk_bytes=chunk_bytes)


def _refuse_a_venv(root: Path, venv: str | os.PathLike[str] | None) -> None:
    """A venv given as CHECKPOINT_DIR (it has pyvenv.cfg): say so, and, when VENV is the
    checkpoint (it has config.json), that the two are swapped."""
    if not os.path.isfile(root / "pyvenv.cfg"):
        return
    if venv is not None and os.path.isfile(Path(venv) / CONFIG_FILE):
        raise UsageError(f"the arguments are swapped: {root} is a venv and {venv} a checkpoint; CHECKPOINT_DIR "
                         f"comes first: `{shell.ple4patch('inspect', venv, root)}`")
    raise UsageError(f"{root} is a venv, not a checkpoint directory: CHECKPOINT_DIR comes first, then the "
                     f"venv (`{shell.ple4patch('inspect', 'CHECKPOINT_DIR', root)}`)")


def inspect_checkpoint(
    checkpoint: str | os.PathLike[str],
    *,
    tp: int | None = None,
    ranks_per_host: int | None = None,
    venv: str | os.PathLike[str] | None = None,
    scan: bool = False,
    progress: bool = False,
    meminfo_path: str = "/proc/meminfo",
    chunk_bytes: int = CHUNK_BYTES,
    host_budget_gib: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> InspectReport:
    """Inspect a checkpoint directory. Usage errors raise; findings go into the report.

    ``tp`` None: not given, the figures are for one rank (and the report says so).

    ``host_budget_gib``: the pinned-host budget per rank, else ``VLLM_QWEN4EXP_PLE_HOST_GIB``
    from ``environ`` (default: this process's environment), else none.
    """
    root = Path(checkpoint)
    if not root.is_dir():
        if root.exists():
            raise UsageError(f"{root} is a file, not a checkpoint directory: pass its directory "
                             f"{Path(os.path.abspath(root)).parent}")
        raise UsageError(f"no such checkpoint directory: {root}")
    if not exists(root, CONFIG_FILE):
        _refuse_a_venv(root, venv)
        raise UsageError(
            f"no {CONFIG_FILE} in {root}: pass the checkpoint directory (the one holding "
            f"{CONFIG_FILE} and {INDEX_FILE})"
        )
    tp_given = tp is not None
    tp = 1 if tp is None else tp
    if tp < 1:
        raise UsageError(f"--tp must be at least 1, got {tp}")
    ranks = tp if ranks_per_host is None else ranks_per_host
    if ranks < 1 or ranks > tp:
        raise UsageError(f"--ranks-per-host must be between 1 and --tp ({tp}), got {ranks}")
    try:
        budget, budget_source = host_budget(host_budget_gib, environ)
        host_reserve(0, environ)  # a bad reserve variable is refused here, before the report
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        raw = load_config(root)
    except AccessError as exc:  # a FIFO, device, directory... or a symlink out: one line, exit 10
        advice = "" if exc.code == "outside" else ": put the model's config.json there"
        raise CheckpointProblem(f"{root / CONFIG_FILE} {exc}{advice}") from None
    except ValueError as exc:
        raise CheckpointProblem(f"{exc}: fetch config.json again") from None

    ckpt = load_checkpoint(root, raw)
    tables = check_tables(ckpt)
    engine_info = None
    engine_problems: list[Problem] = []
    engine_warnings: list[Problem] = []
    if venv is not None:
        engine_info, engine_problems, engine_warnings = venv_engine(venv, tables, judge_set)

    # A checkpoint of another model: no PLE table and no PLE key in config.json. ple4patch
    # changes nothing for it, so only its files' own problems count.
    ple_table = bool(tables) or ckpt.config.names_ple
    if ple_table:
        problems = list(ckpt.config.problems) + list(ckpt.problems) + missing_tables(ckpt, tables)
    else:
        problems = list(ckpt.problems)
    warnings: list[Problem] = []
    for t in tables:
        problems += t.problems
        warnings += t.warnings
    rule = engine_info.get("host_budget_rule") if engine_info else None
    fp8_pin = (engine_info or {}).get("fp8_pin_rule") or PIN_POWER_OF_TWO  # without VENV: as stock
    memory, mem_problems, mem_warnings = host_memory(tables, tp, ranks, meminfo_path, budget, budget_source,
                                                     environ, rule, fp8_pin)
    memory["tp_given"] = tp_given
    problems += mem_problems + engine_problems
    warnings += mem_warnings + engine_warnings

    scan_result = None
    if scan:
        scan_result = _scan(ckpt, tables, progress, chunk_bytes)
        problems += scan_result.problems

    return InspectReport(root, tp, ranks, ckpt, tables, memory, engine_info, scan_result, problems, warnings,
                         ple_table=ple_table)


def run(checkpoint: str | os.PathLike[str], *, progress: bool = True, **options):
    """`ple4patch inspect` as an ``Result``: exit 0 when it will load, 10 when not.

    ``options`` are those of :func:`inspect_checkpoint`. Usage errors (no such
    directory, no config.json, bad --tp) and EngineNotFound (--venv without an
    engine) raise, and the CLI maps them to their exit codes.
    """
    from ..result import Result
    from ..errors import EXIT_OK

    report = inspect_checkpoint(checkpoint, progress=progress, **options)
    data = report.to_json()
    for key in ("schema_version", "ok"):  # Result.to_json writes these itself
        data.pop(key)
    return Result(
        command="inspect",
        exit_code=EXIT_OK if report.ok else CheckpointProblem.exit_code,
        message=report.verdict,  # the verdict is the message, printed last
        data=data,
        output=render_body(report) + "\n",
    )

"""Find a checkpoint's PLE tables and check each against what the engine's loader expects."""

from __future__ import annotations

from .checks import run_checks
from .files import Checkpoint
from .header import TensorInfo
from .layout import PLE_LAYER_ID_BASE, PLE_TENSOR_RE
from .problem import Problem
from .table import TableReport, read_table, table_report


def find_tables(ckpt: Checkpoint) -> dict[str, dict[str, TensorInfo]]:
    """prefix -> {leaf: tensor} for every PLE table in the checkpoint."""
    tables: dict[str, dict[str, TensorInfo]] = {}
    for name, infos in ckpt.tensors.items():
        match = PLE_TENSOR_RE.match(name)
        if match:
            tables.setdefault(match.group("prefix"), {})[match.group("leaf")] = infos[0]
    return tables


def analyze_table(ckpt: Checkpoint, prefix: str, leaves: dict[str, TensorInfo]) -> TableReport:
    """Check one table against what the engine's loader expects (names, dtypes, shapes, coverage)."""
    table = read_table(ckpt.config, prefix, leaves)
    found = run_checks(table)
    return table_report(table, leaves, found.problems, found.warnings)


def check_tables(ckpt: Checkpoint) -> list[TableReport]:
    """Analyze every PLE table, sorted by layer."""
    reports = [analyze_table(ckpt, prefix, leaves) for prefix, leaves in find_tables(ckpt).items()]
    return sorted(reports, key=lambda r: (r.layer, r.prefix))


def missing_tables(ckpt: Checkpoint, tables: list[TableReport]) -> list[Problem]:
    """A problem for each PLE layer of the config that has no table, or when there is none at all."""
    found = {t.ple_layer_id for t in tables}
    problems = []
    for pid in ckpt.config.layer_ids or ():
        if pid not in found:
            layer = pid - PLE_LAYER_ID_BASE
            problems.append(
                Problem("missing_table", f"ple_layer_ids names PLE layer {pid} but the checkpoint has no "
                        f"table for it (layers.{layer} in the tensor names; ple_layer_ids counts from 1)",
                        f"...layers.{layer}.ple.ple_embedding.ngram_embedding.shard_0.weight")
            )
    if not tables and not problems:
        problems.append(
            Problem("missing_table", "no PLE table (…layers.<L>.ple.ple_embedding.ngram_embedding.*) "
                    "in the checkpoint: is this a Qwen3.8-Flash-Next checkpoint?")
        )
    return problems

"""The table checks: one small function per concern, each returning the findings it makes.

Each check takes a :class:`~.table.Table` (the facts) and returns
:class:`Findings`; :data:`TABLE_CHECKS` lists them in the order their findings
are reported, and :func:`run_checks` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .header import TensorInfo
from .layout import (
    BLOCK,
    BLOCK_SCALE_DTYPE,
    BLOCK_SCALE_DTYPES,
    CONFIG_FILE,
    FLOAT_DTYPES,
    FP8_SCALE_DTYPES,
    FP8_WEIGHT_DTYPE,
    GLOBAL_SCALE_DTYPES,
    LAYOUT_CONFIG_DTYPE,
    LAYOUT_FP8,
    LAYOUT_OTHER,
    LAYOUT_ROWPACKED,
    LAYOUT_SPLIT,
    LAYOUT_WORDS,
    NVFP4_CODES_DTYPE,
    QUANT_SOURCE,
    SHARD_BLOCK_SCALE,
    SHARD_GLOBAL_SCALE,
    SHARD_WEIGHT,
    TABLE_FP8_SCALE,
    TABLE_GLOBAL_SCALE,
    codes_width,
    rowpacked_width,
    scales_width,
    ple_layer_id,
    weight_width,
)
from .problem import Problem
from .table import Table


@dataclass
class Findings:
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def extend(self, other: Findings) -> None:
        self.problems += other.problems
        self.warnings += other.warnings


def _problems(*problems: Problem) -> Findings:
    return Findings(list(problems))


def shape_code(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """'rows' when only the row count is off, 'width' when only the width is, else 'shape'."""
    if len(got) == 2 and len(want) == 2:
        if got[1] == want[1]:
            return "rows"
        if got[0] == want[0]:
            return "width"
    return "shape"


def expected_weight(layout: str, head_dim: int | None, rows: int) -> str:
    """What ``shard_<i>.weight`` of ``rows`` rows must be, in words."""
    if head_dim is None:
        return f"[{rows}, ...]"
    width = weight_width(layout, head_dim)
    if layout == LAYOUT_ROWPACKED:
        return f"{NVFP4_CODES_DTYPE} [{rows}, {width}] (D/2 + D/16 for D = {head_dim})"
    if layout == LAYOUT_SPLIT:
        return f"{NVFP4_CODES_DTYPE} [{rows}, {width}] (D/2 for D = {head_dim})"
    if layout == LAYOUT_FP8:
        return f"{FP8_WEIGHT_DTYPE} [{rows}, {width}]"
    return f"[{rows}, {width}]"


def check_has_shards(t: Table) -> Findings:
    """A table needs shard_<i>.weight tensors."""
    if t.weights:
        return Findings()
    return _problems(
        Problem("no_shards", "the table has no shard_<i>.weight tensors", t.full("shard_0.weight"),
                expected=f"shard_0..shard_{t.config.split_ngram_parts - 1}.weight")
    )


def check_whole_blocks(t: Table) -> Findings:
    """NVFP4 needs D to be a multiple of 16."""
    d = t.config_head_dim
    if d is None or not t.nvfp4 or not d % BLOCK:
        return Findings()
    return _problems(
        Problem("config", f"head_dim {d} is not a multiple of {BLOCK}: NVFP4 needs whole "
                "16-value blocks", file=CONFIG_FILE)
    )


def check_config_dtype(t: Table) -> Findings:
    """The config's ple_embedding_dtype selects the layout the tensors hold."""
    cfg, layout = t.config, t.layout
    dtype_key = cfg.key_path("ple_embedding_dtype")
    want_dtype = LAYOUT_CONFIG_DTYPE.get(layout)
    if layout == LAYOUT_OTHER:
        if not t.weights:
            return Findings()
        return _problems(
            Problem(
                "layout",
                "the table's shard weights are "
                + ", ".join(sorted({w.dtype for w in t.weights.values()}))
                + ", a layout no 1Cat-vLLM reads on V100: use the NVFP4 or FP8 checkpoint",
                t.full("shard_0.weight"),
                expected=f"{NVFP4_CODES_DTYPE} [rows, D/2 + D/16] ({LAYOUT_ROWPACKED}), "
                f"{NVFP4_CODES_DTYPE} [rows, D/2] + {BLOCK_SCALE_DTYPE} [rows, D/16] ({LAYOUT_SPLIT}) "
                f"or {FP8_WEIGHT_DTYPE} [rows, D] ({LAYOUT_FP8})",
            )
        )
    expected = f"{dtype_key} = {want_dtype!r}"
    where = f"the {cfg.text_key} object" if cfg.text_key else "the top-level object"
    entry = f'`"ple_embedding_dtype": "{want_dtype}"`'  # in backticks: kept on one line
    # The value the engine keys on for this layout (LAYOUT_CONFIG_DTYPE): the patched loader
    # (ple4patch/kernels/nvfp4_loader.py ple4_nvfp4_requested) accepts "nvfp4_rowpacked" alone,
    # and reads split shards under it, repacking them while loading.
    if layout == LAYOUT_FP8:
        reads = f"which the engine reads when {dtype_key} is {want_dtype!r}"
    else:
        reads = f"which the patched engine reads only when {dtype_key} is {want_dtype!r}"
    if layout == LAYOUT_SPLIT:
        reads += " (there is no 'nvfp4_split' value: it repacks split shards under this one while loading)"
    if cfg.dtype is None or (cfg.dtype_source == QUANT_SOURCE and cfg.dtype != want_dtype):
        why = (
            f" (quantization_config lists the table as {cfg.dtype!r}, which the engine does not key on)"
            if cfg.dtype is not None
            else ""
        )
        return _problems(
            Problem("config_dtype",
                    f"does not set {dtype_key}{why}: the table is {LAYOUT_WORDS[layout]}, {reads}; "
                    f"add {entry} to {where} of config.json",
                    file=CONFIG_FILE, expected=expected, says_expected=True)
        )
    if cfg.dtype != want_dtype:
        source = "" if cfg.dtype_source == dtype_key else f" (from {cfg.dtype_source})"
        return _problems(
            Problem("config_dtype",
                    f"says {dtype_key} = {cfg.dtype!r}{source} but the table is {LAYOUT_WORDS[layout]}, "
                    f"{reads}; set {entry} in {where} of config.json (or serve the checkpoint its value "
                    f"names)",
                    file=CONFIG_FILE, expected=expected, says_expected=True)
        )
    if cfg.dtype_source == QUANT_SOURCE:
        return Findings(warnings=[
            Problem("config_dtype",
                    "the FP8 table is declared only in quantization_config.quantized_layers: 1Cat-vLLM "
                    f"1.5.1 and later read that, 1.5.0 needs {dtype_key}",
                    file=CONFIG_FILE, expected=expected)
        ])
    return Findings()


def check_layer_listed(t: Table) -> Findings:
    """The table's decoder layer is one ple_layer_ids names (1-based: `layout.ple_layer_id`)."""
    ids = t.config.get("ple_layer_ids")
    pid = ple_layer_id(t.layer)
    if t.config.layer_ids is None or t.engine_rows is not None or pid in t.config.layer_ids:
        return Findings()
    return _problems(
        Problem("layer", f"a PLE table for PLE layer {pid} (layers.{t.layer} in the tensor names; "
                f"ple_layer_ids counts from 1), but ple_layer_ids {ids} has no {pid}: the engine has no "
                "module to load it into",
                t.prefix, file=CONFIG_FILE)
    )


def check_row_total(t: Table) -> Findings:
    """With every shard present, the shards add up to the rows the engine builds."""
    if t.engine_rows is None or t.absent or t.checkpoint_rows == t.rows:
        return Findings()
    return _problems(
        Problem("rows", f"the shards add up to {t.checkpoint_rows} rows but the engine builds "
                f"{t.rows} from ngram_vocab_size_base and ple_layer_ids: a checkpoint of "
                "another model, or a config that does not belong to it", t.prefix,
                expected=f"{t.rows} rows")
    )


def check_missing_shards(t: Table) -> Findings:
    """Every shard that holds rows is there (when the config says how many there are)."""
    if not t.config.parts_known:
        return Findings()
    return _problems(*(
        Problem("missing_shard", f"missing: shard {i} of split_ngram_parts = {t.parts}",
                t.full(f"shard_{i}.{SHARD_WEIGHT}"),
                expected=expected_weight(t.layout, t.head_dim, t.shard_rows(i)))
        for i in t.missing
    ))


def check_extra_shards(t: Table) -> Findings:
    """No shard index reaches split_ngram_parts (when the config says how many there are)."""
    if not t.config.parts_known:
        return Findings()
    return _problems(*(
        Problem("extra_shard", f"shard index {i} exceeds split_ngram_parts = {t.parts}",
                t.full(f"shard_{i}.{SHARD_WEIGHT}"), expected=f"shard indices 0..{t.parts - 1}",
                file=t.weights[i].file)
        for i in sorted(i for i in t.weights if i >= t.parts)
    ))


def _fp8_shard(t: Table, i: int, head_dim: int) -> list[Problem]:
    w, rows = t.weights[i], t.shard_rows(i)
    expected = expected_weight(LAYOUT_FP8, head_dim, rows)
    if w.dtype != FP8_WEIGHT_DTYPE:
        return [Problem("dtype", f"is {w.describe()}", w.name, expected, w.file)]
    if w.shape != (rows, head_dim):
        return [Problem(shape_code(w.shape, (rows, head_dim)), f"is {w.describe()}", w.name, expected, w.file)]
    return []


def _u8_of_width(w: TensorInfo, width: int) -> bool:
    return w.dtype == NVFP4_CODES_DTYPE and len(w.shape) == 2 and w.shape[1] == width


def _nvfp4_shard(t: Table, i: int, head_dim: int) -> list[Problem]:
    """Each NVFP4 shard row-packed, or split (codes + block scales): the loader takes either."""
    w, rows, s = t.weights[i], t.shard_rows(i), t.block_scales.get(i)
    code_w, packed_w, scale_w = codes_width(head_dim), rowpacked_width(head_dim), scales_width(head_dim)
    split_form = _u8_of_width(w, code_w)
    if s is not None and not split_form and len(w.shape) == 2 and w.shape[1] == packed_w:
        return [Problem("mixed_shard", "a row-packed weight and a split block-scale tensor for one shard",
                        s.name, f"no {SHARD_BLOCK_SCALE} beside a row-packed {SHARD_WEIGHT}", s.file)]
    exp_s = f"{BLOCK_SCALE_DTYPE} (or {NVFP4_CODES_DTYPE}) [{rows}, {scale_w}]"
    if s is None and split_form:
        return [Problem("missing_block_scale",
                        f"missing: shard_{i}.{SHARD_WEIGHT} holds only the codes ({w.describe()})",
                        t.full(f"shard_{i}.{SHARD_BLOCK_SCALE}"), exp_s)]
    if split_form or s is not None:
        form = LAYOUT_SPLIT
    elif _u8_of_width(w, packed_w):
        form = LAYOUT_ROWPACKED
    else:
        form = t.layout  # neither: judge it by the form most shards use
    problems = []
    exp = expected_weight(form, head_dim, rows)
    want_shape = (rows, code_w if form == LAYOUT_SPLIT else packed_w)
    if w.dtype != NVFP4_CODES_DTYPE:
        problems.append(Problem("dtype", f"is {w.describe()}", w.name, exp, w.file))
    elif w.shape != want_shape:
        problems.append(Problem(shape_code(w.shape, want_shape), f"is {w.describe()}", w.name, exp, w.file))
    if form == LAYOUT_SPLIT:
        if s is None:
            problems.append(Problem("missing_block_scale", "missing", t.full(f"shard_{i}.{SHARD_BLOCK_SCALE}"), exp_s))
        elif s.dtype not in BLOCK_SCALE_DTYPES or s.shape != (rows, scale_w):
            problems.append(Problem("block_scale", f"is {s.describe()}", s.name, exp_s, s.file))
    return problems


def check_shard_tensors(t: Table) -> Findings:
    """Each present shard's dtype and shape (and, when split, its block scales)."""
    head_dim = t.head_dim
    if t.layout == LAYOUT_OTHER or head_dim is None:
        return Findings()
    one = _fp8_shard if t.layout == LAYOUT_FP8 else _nvfp4_shard
    return Findings([p for i in t.present for p in one(t, i, head_dim)])


def check_stray_block_scales(t: Table) -> Findings:
    """FP8 and other tables have no block-scale tensors."""
    if t.layout not in (LAYOUT_FP8, LAYOUT_OTHER):
        return Findings()
    return _problems(*(
        Problem("unexpected", f"a block-scale tensor in a {t.layout} table", s.name, file=s.file)
        for _, s in sorted(t.block_scales.items())
    ))


def check_nvfp4_global_scale(t: Table) -> Findings:
    """NVFP4: one FP32 [1] global scale, table-level or per shard; no FP8 table scale."""
    if not t.nvfp4:
        return Findings()
    found = Findings()
    exp_one = f"{'/'.join(GLOBAL_SCALE_DTYPES)} [1]"
    for g in t.global_scales:
        if g.numel != 1 or g.dtype not in FLOAT_DTYPES:
            found.problems.append(Problem("global_scale", f"is {g.describe()}", g.name, exp_one, g.file))
        elif g.dtype not in GLOBAL_SCALE_DTYPES:
            found.warnings.append(Problem("global_scale", f"is {g.describe()}: the loader converts it to "
                                          "FP32, but ModelOpt writes FP32", g.name, exp_one, g.file))
    if t.table_scale is not None and t.shard_globals:
        found.warnings.append(
            Problem("global_scale", "both a table-level and per-shard global scales: the "
                    "loader requires them all equal (--scan compares them)", t.full(TABLE_GLOBAL_SCALE))
        )
    elif t.table_scale is None and t.shard_globals:
        found.warnings += [
            Problem("global_scale", "no per-shard global scale here while other shards "
                    "carry one (the loader needs just one)", t.full(f"shard_{i}.{SHARD_GLOBAL_SCALE}"), exp_one)
            for i in t.present if i not in t.shard_globals
        ]
    elif t.table_scale is None:
        found.problems.append(
            Problem("missing_global_scale", "no NVFP4 global scale: without it every value is off by ~5000x",
                    t.full(TABLE_GLOBAL_SCALE), f"{exp_one}, or shard_<i>.{SHARD_GLOBAL_SCALE} {exp_one} per shard")
        )
    fp8 = t.table_fp8_scale
    if fp8 is not None:
        found.problems.append(Problem("unexpected", "an FP8 table scale in an NVFP4 table: the patched "
                                      "loader refuses it", fp8.name, file=fp8.file))
    return found


def check_fp8_global_scale(t: Table) -> Findings:
    """FP8: the table's weight_scale, one value; no NVFP4 global scales."""
    if t.layout != LAYOUT_FP8:
        return Findings()
    found = Findings()
    exp_g = f"{'/'.join(FP8_SCALE_DTYPES)} [1]"
    fp8 = t.table_fp8_scale
    if fp8 is None:
        found.problems.append(Problem("missing_global_scale", "missing: the FP8 table needs its global scale",
                                      t.full(TABLE_FP8_SCALE), exp_g))
    elif fp8.dtype not in FP8_SCALE_DTYPES or fp8.numel != 1:
        found.problems.append(Problem("global_scale", f"is {fp8.describe()}", fp8.name, exp_g, fp8.file))
    nvfp4_scales = ([t.table_scale] if t.table_scale else []) + [t.shard_globals[i] for i in sorted(t.shard_globals)]
    found.problems += [Problem("unexpected", "an NVFP4 global scale in an FP8 table", g.name, file=g.file)
                       for g in nvfp4_scales]
    return found


def check_unexpected_leaves(t: Table) -> Findings:
    """Every other tensor under the table's prefix is one the loader does not read."""
    return _problems(*(
        Problem("unexpected", "not a tensor the PLE loader reads", info.name,
                f"shard_<i>.{SHARD_WEIGHT}, shard_<i>.{SHARD_BLOCK_SCALE}, shard_<i>.{SHARD_GLOBAL_SCALE}, "
                f"{TABLE_GLOBAL_SCALE} or {TABLE_FP8_SCALE}", info.file)
        for _, info in sorted(t.other_leaves.items())
    ))


#: Every table check, in the order its findings are reported.
TABLE_CHECKS: tuple[Callable[[Table], Findings], ...] = (
    check_has_shards,
    check_whole_blocks,
    check_config_dtype,
    check_layer_listed,
    check_row_total,
    check_missing_shards,
    check_extra_shards,
    check_shard_tensors,
    check_stray_block_scales,
    check_nvfp4_global_scale,
    check_fp8_global_scale,
    check_unexpected_leaves,
)


def run_checks(t: Table, checks: tuple[Callable[[Table], Findings], ...] = TABLE_CHECKS) -> Findings:
    found = Findings()
    for check in checks:
        found.extend(check(t))
    return found

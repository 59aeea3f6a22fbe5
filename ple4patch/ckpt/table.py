"""What one PLE table is, before any judgement: its tensors grouped, its layout, width and rows.

:func:`read_table` derives these facts from the tensors and the config;
:mod:`.checks` judges them; :mod:`.tables` puts the two together.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .config import PleConfig
from .header import TensorInfo
from .layout import (
    BLOCK,
    DTYPE_BYTES,
    FP8_WEIGHT_DTYPE,
    LAYOUT_FP8,
    LAYOUT_OTHER,
    LAYOUT_ROWPACKED,
    LAYOUT_SPLIT,
    NVFP4,
    NVFP4_CODES_DTYPE,
    NVFP4_LAYOUTS,
    PLE_TENSOR_RE,
    SHARD_BLOCK_SCALE,
    SHARD_GLOBAL_SCALE,
    SHARD_LEAF_RE,
    SHARD_WEIGHT,
    TABLE_FP8_SCALE,
    TABLE_GLOBAL_SCALE,
    head_dim_from_width,
    ple_layer_id,
    row_bytes,
)
from .rows import engine_table_rows, shard_rows


@dataclass
class Table:
    """One table's tensors and what the config and tensors say about it."""

    config: PleConfig
    layer: int
    prefix: str
    weights: dict[int, TensorInfo]  # shard index -> shard_<i>.weight
    block_scales: dict[int, TensorInfo]  # shard index -> shard_<i>.weight_scale
    shard_globals: dict[int, TensorInfo]  # shard index -> shard_<i>.weight_scale_2
    table_scale: TensorInfo | None  # ngram_embedding.weight_scale_2 (NVFP4)
    table_fp8_scale: TensorInfo | None  # ngram_embedding.weight_scale (FP8)
    other_leaves: dict[str, TensorInfo]  # every other leaf: not read by the loader
    layout: str
    config_head_dim: int | None  # D before the NVFP4 block check (config or tensors)
    head_dim_source: str  # "config" or "tensors"
    parts: int
    checkpoint_rows: int
    engine_rows: int | None
    rows: int
    rows_source: str
    absent: list[int]  # shard indices below parts with no weight
    missing: list[int]  # absent shards that should hold rows
    present: list[int]

    def full(self, leaf: str) -> str:
        return f"{self.prefix}.{leaf}"

    @property
    def nvfp4(self) -> bool:
        return self.layout in NVFP4_LAYOUTS

    @property
    def head_dim(self) -> int | None:
        """D as the table can use it: None when unknown or, for NVFP4, not whole 16-value blocks."""
        d = self.config_head_dim
        return None if d is None or (self.nvfp4 and d % BLOCK) else d

    def shard_rows(self, index: int) -> int:
        """The rows shard `index` holds; without a known split_ngram_parts
        (``PleConfig.parts_known``) a present shard's own height, which nothing contradicts."""
        w = self.weights.get(index)
        if not self.config.parts_known and w is not None and len(w.shape) == 2:
            return w.shape[0]
        return shard_rows(self.rows, self.parts, index)

    @property
    def global_scale(self) -> str | None:
        """Where the global scale comes from: "table", "per_shard", "table+per_shard" or None."""
        if self.nvfp4:
            if self.table_scale is not None:
                return "table+per_shard" if self.shard_globals else "table"
            return "per_shard" if self.shard_globals else None
        if self.layout == LAYOUT_FP8 and self.table_fp8_scale is not None:
            return "table"
        return None

    @property
    def global_scales(self) -> list[TensorInfo]:
        """The global-scale tensors the loader reads for this layout."""
        if self.nvfp4:
            table = [self.table_scale] if self.table_scale else []
            return table + [self.shard_globals[i] for i in sorted(self.shard_globals)]
        if self.layout == LAYOUT_FP8 and self.table_fp8_scale is not None:
            return [self.table_fp8_scale]
        return []


def _shard_layout(weight: TensorInfo, has_block_scale: bool) -> str:
    if weight.dtype == NVFP4_CODES_DTYPE:
        return LAYOUT_SPLIT if has_block_scale else LAYOUT_ROWPACKED
    if weight.dtype == FP8_WEIGHT_DTYPE:
        return LAYOUT_FP8
    return LAYOUT_OTHER


def _vote_layout(config: PleConfig, weights: dict[int, TensorInfo], block_scales: dict[int, Any]) -> str:
    """What the tensors hold: a vote over the shards, so that one broken shard does not decide."""
    votes = Counter(_shard_layout(w, i in block_scales) for i, w in weights.items())
    if not votes:
        return LAYOUT_OTHER
    family = Counter({NVFP4: votes[LAYOUT_ROWPACKED] + votes[LAYOUT_SPLIT],
                      LAYOUT_FP8: votes[LAYOUT_FP8], LAYOUT_OTHER: votes[LAYOUT_OTHER]})
    best = max(family.values())
    tied = [f for f in (NVFP4, LAYOUT_FP8, LAYOUT_OTHER) if family[f] == best]
    config_family = NVFP4 if config.dtype_layout in NVFP4_LAYOUTS else config.dtype_layout
    chosen = config_family if config_family in tied else tied[0]
    if chosen == NVFP4:
        return LAYOUT_SPLIT if votes[LAYOUT_SPLIT] > votes[LAYOUT_ROWPACKED] else LAYOUT_ROWPACKED
    return chosen


def read_table(config: PleConfig, prefix: str, leaves: dict[str, TensorInfo]) -> Table:
    """Group a table's tensors and derive its layout, D and rows (no judgement)."""
    match = PLE_TENSOR_RE.match(prefix + ".x")
    assert match is not None
    layer = int(match.group("layer"))
    weights: dict[int, TensorInfo] = {}
    block_scales: dict[int, TensorInfo] = {}
    shard_globals: dict[int, TensorInfo] = {}
    other: dict[str, TensorInfo] = {}
    kinds = {SHARD_WEIGHT: weights, SHARD_BLOCK_SCALE: block_scales, SHARD_GLOBAL_SCALE: shard_globals}
    for leaf, info in leaves.items():
        m = SHARD_LEAF_RE.match(leaf)
        if m:
            kinds[m.group("kind")][int(m.group("index"))] = info
        else:
            other[leaf] = info
    table_scale = other.pop(TABLE_GLOBAL_SCALE, None)
    table_fp8 = other.pop(TABLE_FP8_SCALE, None)
    layout = _vote_layout(config, weights, block_scales)

    head_dim, head_dim_source = config.head_dim, "config"
    if head_dim is None and weights:
        widths = Counter(w.shape[1] for w in weights.values() if len(w.shape) == 2)
        if widths:
            head_dim = head_dim_from_width(layout, widths.most_common(1)[0][0])
            head_dim_source = "tensors"

    # Rows: what the engine will build, else what the checkpoint adds up to.
    parts = config.split_ngram_parts
    ckpt_rows = sum(w.shape[0] for w in weights.values() if w.shape)
    engine_rows = engine_table_rows(config, layer)
    # Without a known split_ngram_parts (`PleConfig.parts_known`) no shard counts as absent: the
    # table is what the checkpoint holds.
    absent = [i for i in range(parts) if i not in weights] if config.parts_known else []
    if engine_rows is not None:
        total, rows_source = engine_rows, "config"
    else:
        rows_source = "checkpoint"
        total = ckpt_rows
        if absent:  # estimate the missing shards from the typical shard height
            heights = Counter(w.shape[0] for i, w in weights.items() if w.shape and i < parts)
            total += (heights.most_common(1)[0][0] if heights else 0) * len(absent)
    missing = [i for i in absent if shard_rows(total, parts, i) > 0]  # empty tail shards may be absent
    present = sorted(i for i in weights if i < parts)
    return Table(
        config=config, layer=layer, prefix=prefix, weights=weights, block_scales=block_scales,
        shard_globals=shard_globals, table_scale=table_scale, table_fp8_scale=table_fp8,
        other_leaves=other, layout=layout, config_head_dim=head_dim, head_dim_source=head_dim_source,
        parts=parts, checkpoint_rows=ckpt_rows, engine_rows=engine_rows, rows=total,
        rows_source=rows_source, absent=absent, missing=missing, present=present,
    )


@dataclass
class TableReport:
    layer: int
    prefix: str
    layout: str
    config_layout: str | None
    head_dim: int | None
    head_dim_source: str  # "config" or "tensors"
    parts: int
    rows: int  # rows the engine expects (or the checkpoint holds, see rows_source)
    rows_source: str  # "config" (the engine's construction) or "checkpoint"
    checkpoint_rows: int  # rows the present shard weights add up to
    shards_present: list[int]
    shards_missing: list[int]
    global_scale: str | None  # "table", "per_shard", "table+per_shard" or None
    disk_bytes: int
    problems: list
    warnings: list
    shard_weights: dict[int, TensorInfo] = field(default_factory=dict, repr=False)
    shard_block_scales: dict[int, TensorInfo] = field(default_factory=dict, repr=False)
    global_scales: list[TensorInfo] = field(default_factory=list, repr=False)
    other_itemsize: int = 2  # bytes a value takes in an "other" (e.g. BF16) table

    @property
    def row_bytes(self) -> int | None:
        return row_bytes(self.layout, self.head_dim, self.other_itemsize) if self.head_dim else None

    @property
    def ple_layer_id(self) -> int:
        """The layer as config.json's ``ple_layer_ids`` names it (1-based; ``layer`` is 0-based)."""
        return ple_layer_id(self.layer)

    def to_json(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in ("layer", "prefix", "layout", "config_layout", "head_dim",
                                                    "head_dim_source", "row_bytes", "rows", "rows_source",
                                                    "checkpoint_rows")}
        out["ple_layer_id"] = self.ple_layer_id
        out.update(split_ngram_parts=self.parts, shards_present=len(self.shards_present),
                   shards_missing=self.shards_missing, global_scale=self.global_scale,
                   disk_bytes=self.disk_bytes)
        return out


def table_report(table: Table, leaves: dict[str, TensorInfo], problems: list, warnings: list) -> TableReport:
    return TableReport(
        layer=table.layer, prefix=table.prefix, layout=table.layout,
        config_layout=table.config.dtype_layout, head_dim=table.head_dim,
        head_dim_source=table.head_dim_source, parts=table.parts, rows=table.rows,
        rows_source=table.rows_source, checkpoint_rows=table.checkpoint_rows,
        shards_present=table.present, shards_missing=table.missing,
        global_scale=table.global_scale, disk_bytes=sum(t.nbytes for t in leaves.values()),
        problems=problems, warnings=warnings, shard_weights=table.weights,
        shard_block_scales=table.block_scales, global_scales=table.global_scales,
        other_itemsize=max((DTYPE_BYTES.get(w.dtype, 2) for w in table.weights.values()), default=2),
    )

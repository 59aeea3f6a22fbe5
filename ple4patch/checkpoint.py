"""Read a checkpoint's config and safetensors headers and check its PLE tables.

Everything here works from ``config.json``, ``model.safetensors.index.json`` and
the safetensors *headers* (8-byte little-endian length + JSON); no tensor data is
read except by :func:`scan_tables`, which streams the PLE bytes in bounded
chunks. No torch, no numpy: ``ple4patch inspect`` has to answer in seconds on a
host that has not installed the kernels extra.

The names, dtypes and shapes the patched loader expects live in the constants
just below; keep them aligned with ``ple4patch/kernels/nvfp4_loader.py``.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# ---------------------------------------------------------------------------
# What the (patched) engine expects. One place: align these with the loader.
# ---------------------------------------------------------------------------

#: A PLE table tensor: ``<...>layers.<L>.ple.ple_embedding.ngram_embedding.<leaf>``.
PLE_TENSOR_RE = re.compile(
    r"^(?P<prefix>(?:.*\.)?layers\.(?P<layer>\d+)\.ple\.ple_embedding\.ngram_embedding)"
    r"\.(?P<leaf>.+)$"
)
#: A checkpoint shard of the table: ``shard_<i>.weight`` / ``.weight_scale`` / ``.weight_scale_2``.
SHARD_LEAF_RE = re.compile(r"^shard_(?P<index>\d+)\.(?P<kind>weight|weight_scale|weight_scale_2)$")

SHARD_WEIGHT = "weight"  # shard_<i>.weight: codes (+ scales when row-packed) or FP8 values
SHARD_BLOCK_SCALE = "weight_scale"  # shard_<i>.weight_scale: E4M3 block scales (NVIDIA split layout)
SHARD_GLOBAL_SCALE = "weight_scale_2"  # shard_<i>.weight_scale_2: per-shard copy of the global scale
TABLE_GLOBAL_SCALE = "weight_scale_2"  # ngram_embedding.weight_scale_2: NVFP4 global scale (FP32)
TABLE_FP8_SCALE = "weight_scale"  # ngram_embedding.weight_scale: FP8 global scale

LAYOUT_ROWPACKED = "nvfp4_rowpacked"  # shard_<i>.weight U8 [rows, D/2 + D/16]
LAYOUT_SPLIT = "nvfp4_split"  # shard_<i>.weight U8 [rows, D/2] + shard_<i>.weight_scale F8_E4M3 [rows, D/16]
LAYOUT_FP8 = "fp8"  # shard_<i>.weight F8_E4M3 [rows, D] + ngram_embedding.weight_scale
LAYOUT_OTHER = "other"  # anything else (BF16 table, mixed, unknown dtypes)
LAYOUTS = (LAYOUT_ROWPACKED, LAYOUT_SPLIT, LAYOUT_FP8, LAYOUT_OTHER)

#: ``ple_embedding_dtype`` values (after the engine strips ``torch.``) and the layout each selects.
CONFIG_DTYPE_LAYOUT = {"nvfp4_rowpacked": LAYOUT_ROWPACKED, "float8_e4m3fn": LAYOUT_FP8}
#: The value ``text_config.ple_embedding_dtype`` must hold for each layout the engine reads
#: (the patched loader reads both NVFP4 layouts under "nvfp4_rowpacked").
LAYOUT_CONFIG_DTYPE = {
    LAYOUT_ROWPACKED: "nvfp4_rowpacked",
    LAYOUT_SPLIT: "nvfp4_rowpacked",
    LAYOUT_FP8: "float8_e4m3fn",
}
#: ModelOpt ``quantization_config.quantized_layers[...].quant_algo`` for the table, when the
#: config has no ``ple_embedding_dtype`` (the stock engine resolves FP8 storage that way).
QUANT_ALGO_LAYOUT = {"FP8": LAYOUT_FP8, "NVFP4": LAYOUT_SPLIT}
QUANT_SOURCE = "quantization_config.quantized_layers"

NVFP4 = "nvfp4"  # the family: row-packed and split shards (the patched loader takes both, per shard)
NVFP4_LAYOUTS = (LAYOUT_ROWPACKED, LAYOUT_SPLIT)

STOCK_ENGINE_READS = (LAYOUT_FP8,)
#: The patched loader repacks split shards into 90 B rows while loading.
PATCHED_ENGINE_READS = (LAYOUT_FP8, LAYOUT_ROWPACKED, LAYOUT_SPLIT)

NVFP4_CODES_DTYPE = "U8"
BLOCK_SCALE_DTYPE = "F8_E4M3"
FP8_WEIGHT_DTYPE = "F8_E4M3"
BLOCK_SCALE_DTYPES = ("F8_E4M3", "U8")  # split-layout weight_scale: E4M3 (or its raw bytes)
GLOBAL_SCALE_DTYPES = ("F32",)  # NVFP4 weight_scale_2 (other float dtypes load, converted: a warning)
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")
FP8_SCALE_DTYPES = ("F32", "BF16", "F16")  # FP8 weight_scale (the engine casts it to the model dtype)
# A global scale is one value: [1] as written by ModelOpt; the loaders take any shape of one element.
BLOCK = 16  # values per E4M3 block scale

#: The engine's default when ``split_ngram_parts`` is absent from the config.
DEFAULT_SPLIT_NGRAM_PARTS = 512
#: Config keys the PLE layer reads (from ``text_config`` when there is one).
REQUIRED_CONFIG_KEYS = (
    "ple_layer_ids",
    "ple_embed_dim",
    "ngram_size",
    "heads_per_ngram",
    "ngram_vocab_size_base",
    "make_ngram_vocab_size_divisible_by",
)

# ---------------------------------------------------------------------------
# safetensors headers
# ---------------------------------------------------------------------------

DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


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


@dataclass(frozen=True)
class Problem:
    """One thing that keeps the checkpoint from loading (or, as a warning, may)."""

    code: str  # short machine-readable kind: missing_shard, dtype, shape, ...
    message: str  # one line: what is wrong and what to do
    tensor: str | None = None
    expected: str | None = None
    file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "tensor": self.tensor,
            "file": self.file,
            "message": self.message,
            "expected": self.expected,
        }

    def line(self) -> str:
        where = self.tensor or self.file
        text = f"{where}: {self.message}" if where else self.message
        if self.expected:
            text += f" (expected {self.expected})"
        return text


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


def _dims(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(isinstance(d, int) and d >= 0 for d in value):
        return None
    return tuple(value)


def read_safetensors_header(path: Path, name: str | None = None) -> SafetensorsFile:
    """Parse one file's header (no tensor data is read).

    Raises HeaderError when the header itself is unreadable; per-tensor defects
    (bad offsets, data past the end of a truncated file) become problems.
    """
    name = name or path.name
    size = path.stat().st_size
    with open(path, "rb") as handle:
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
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeaderError(f"header is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise HeaderError("header is not a JSON object")
    data_start = 8 + length
    data_len = size - data_start
    tensors: dict[str, TensorInfo] = {}
    problems: list[Problem] = []
    for tname, entry in meta.items():
        if tname == "__metadata__":
            continue
        if not isinstance(entry, dict):
            problems.append(Problem("header", "header entry is not an object", tname, file=name))
            continue
        dtype, shape, offsets = entry.get("dtype"), _dims(entry.get("shape")), entry.get("data_offsets")
        if (
            not isinstance(dtype, str)
            or shape is None
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            problems.append(
                Problem("header", "malformed header entry", tname, "dtype, shape, data_offsets", name)
            )
            continue
        begin, end = offsets
        itemsize = DTYPE_BYTES.get(dtype)
        if itemsize is not None and end - begin != math.prod(shape) * itemsize:
            problems.append(
                Problem(
                    "header",
                    f"data_offsets span {end - begin} bytes for {dtype} {list(shape)}",
                    tname,
                    f"{math.prod(shape) * itemsize} bytes",
                    name,
                )
            )
        if end > data_len:
            problems.append(
                Problem(
                    "truncated",
                    f"data ends at byte {data_start + end} but the file has {size} bytes: "
                    "the download is incomplete, fetch this file again",
                    tname,
                    file=name,
                )
            )
        tensors[tname] = TensorInfo(tname, name, dtype, shape, data_start + begin, end - begin)
    return SafetensorsFile(path, name, size, data_start, tensors, problems)


# ---------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------


@dataclass
class PleConfig:
    """The PLE part of config.json, as the engine's PLE layer sees it."""

    raw: dict[str, Any]
    text: dict[str, Any]  # text_config when present (what the engine reads), else the top level
    text_key: str  # "text_config" or "" (top level)
    dtype: str | None  # ple_embedding_dtype without "torch.", None when unset
    dtype_source: str | None  # "text_config.ple_embedding_dtype", "quantization_config", ...
    dtype_layout: str | None  # the layout that dtype selects (None: unknown / unset)
    head_dim: int | None
    split_ngram_parts: int
    split_ngram_parts_default: bool
    problems: list[Problem]

    def get(self, key: str) -> Any:
        return self.text.get(key)

    def key_path(self, key: str) -> str:
        return f"{self.text_key}.{key}" if self.text_key else key


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def read_config(raw: dict[str, Any]) -> PleConfig:
    problems: list[Problem] = []
    text_cfg = raw.get("text_config")
    if isinstance(text_cfg, dict):
        text, text_key = text_cfg, "text_config"
    else:
        text, text_key = raw, ""

    def path(key: str) -> str:
        return f"{text_key}.{key}" if text_key else key

    for key in REQUIRED_CONFIG_KEYS:
        if text.get(key) is None:
            problems.append(
                Problem("config", f"lacks {path(key)}, which the PLE layer reads",
                        tensor=None, expected="the value from the model's published config",
                        file=CONFIG_FILE)
            )

    dtype: str | None = None
    source: str | None = None
    if text.get("ple_embedding_dtype") is not None:
        dtype, source = str(text["ple_embedding_dtype"]), path("ple_embedding_dtype")
    elif text_key and raw.get("ple_embedding_dtype") is not None:
        dtype, source = str(raw["ple_embedding_dtype"]), "ple_embedding_dtype"
        problems.append(
            Problem(
                "config",
                "ple_embedding_dtype is set at the top level, but the engine reads text_config: "
                "move it into text_config",
                expected=f"text_config.ple_embedding_dtype = {dtype!r}",
                file=CONFIG_FILE,
            )
        )
    if dtype is not None:
        dtype = dtype.removeprefix("torch.")
        layout = CONFIG_DTYPE_LAYOUT.get(dtype)
    else:
        layout = None
        quant = raw.get("quantization_config") or text.get("quantization_config") or {}
        layers = quant.get("quantized_layers") if isinstance(quant, dict) else None
        if isinstance(layers, dict):
            algos = {
                str(cfg.get("quant_algo"))
                for name, cfg in layers.items()
                if ".ple.ple_embedding.ngram_embedding" in name and isinstance(cfg, dict)
            }
            if len(algos) == 1:
                algo = algos.pop()
                layout = QUANT_ALGO_LAYOUT.get(algo)
                dtype = {LAYOUT_FP8: "float8_e4m3fn"}.get(layout or "", algo.lower())
                source = QUANT_SOURCE

    head_dim = None
    embed, ngram, heads = (_int(text.get(k)) for k in ("ple_embed_dim", "ngram_size", "heads_per_ngram"))
    if embed is not None and ngram is not None and heads is not None:
        if ngram < 2 or heads <= 0 or embed <= 0 or embed % ((ngram - 1) * heads):
            problems.append(
                Problem(
                    "config",
                    f"ple_embed_dim {embed} is not divisible by (ngram_size-1)*heads_per_ngram "
                    f"= {(ngram - 1) * heads}",
                    file=CONFIG_FILE,
                )
            )
        else:
            head_dim = embed // ((ngram - 1) * heads)

    parts_value = text.get("split_ngram_parts")
    parts_default = parts_value is None
    parts = DEFAULT_SPLIT_NGRAM_PARTS if parts_default else _int(parts_value)
    if parts is None or parts <= 0:
        problems.append(
            Problem("config", f"split_ngram_parts {parts_value!r} is not a positive integer",
                    file=CONFIG_FILE)
        )
        parts = DEFAULT_SPLIT_NGRAM_PARTS
    return PleConfig(raw, text, text_key, dtype, source, layout, head_dim, parts, parts_default, problems)


# ---------------------------------------------------------------------------
# The engine's table size (mirrors the PLE layer's construction from the config)
# ---------------------------------------------------------------------------

_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for every n < 3.3e24."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def primes_after(start: int, count: int) -> list[int]:
    """The first ``count`` primes greater than ``start``."""
    found: list[int] = []
    candidate = start
    while len(found) < count:
        candidate += 1
        if is_prime(candidate):
            found.append(candidate)
    return found


def engine_table_rows(config: PleConfig, layer: int) -> int | None:
    """Rows of the table the engine builds for decoder layer ``layer`` (0-based).

    Each of the layer's n-gram heads gets a prime-sized slice (the k-th prime at
    or above ``ngram_vocab_size_base``, k counted over all PLE layers' heads),
    the sum padded to ``make_ngram_vocab_size_divisible_by``. None when the
    config lacks what that takes or the layer is not a PLE layer.
    """
    text = config.text
    ids = text.get("ple_layer_ids")
    ngram, heads = _int(text.get("ngram_size")), _int(text.get("heads_per_ngram"))
    divisor = _int(text.get("make_ngram_vocab_size_divisible_by"))
    if not isinstance(ids, list) or ngram is None or heads is None or not divisor or divisor <= 0:
        return None
    sorted_ids = sorted({i for i in (_int(x) for x in ids) if i is not None})
    if layer + 1 not in sorted_ids or ngram < 2 or heads <= 0:
        return None
    dense = sorted_ids.index(layer + 1)
    n_heads = (ngram - 1) * heads
    constants = text.get("gguf_ple_constants")
    if isinstance(constants, dict) and constants.get("ngram_heads_vocab_sizes"):
        total = sum(int(s) for s in constants["ngram_heads_vocab_sizes"])
    else:
        base = _int(text.get("ngram_vocab_size_base"))
        if base is None or base <= 0:
            return None
        primes = primes_after(base - 1, (dense + 1) * n_heads)
        total = sum(primes[dense * n_heads : (dense + 1) * n_heads])
    return -(-total // divisor) * divisor


def shard_rows(total: int, parts: int, index: int) -> int:
    """Rows of checkpoint shard ``index``: ceil(total/parts), the last ones shorter."""
    size = -(-total // parts)
    return max(0, min(size, total - index * size))


def row_bytes(layout: str, head_dim: int, other_itemsize: int = 2) -> int:
    """Bytes a row of the table takes in the engine's pinned host table for ``layout``."""
    if layout in (LAYOUT_ROWPACKED, LAYOUT_SPLIT):  # split would have to be repacked
        return head_dim // 2 + head_dim // BLOCK
    if layout == LAYOUT_FP8:
        return head_dim
    return head_dim * other_itemsize


# ---------------------------------------------------------------------------
# Loading the checkpoint's headers
# ---------------------------------------------------------------------------


@dataclass
class Checkpoint:
    root: Path
    config: PleConfig
    index_file: str | None
    files: dict[str, SafetensorsFile]
    tensors: dict[str, list[TensorInfo]]  # name -> every file that holds it
    problems: list[Problem]

    def tensor(self, name: str) -> TensorInfo | None:
        found = self.tensors.get(name)
        return found[0] if found else None


def load_config(root: Path) -> dict[str, Any]:
    """config.json as a dict; raises ValueError (with a one-line reason) when unreadable."""
    path = root / CONFIG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: not a JSON object")
    return raw


def load_checkpoint(root: Path, raw_config: dict[str, Any]) -> Checkpoint:
    """Read the index and every shard file's header. Defects become problems."""
    problems: list[Problem] = []
    config = read_config(raw_config)
    index_file: str | None = None
    wanted: dict[str, str] = {}  # tensor -> file, from the index
    file_names: list[str] = []
    index_path = root / INDEX_FILE
    if index_path.is_file():
        index_file = INDEX_FILE
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
            weight_map = index["weight_map"]
            if not isinstance(weight_map, dict):
                raise TypeError("weight_map is not an object")
            wanted = {str(k): str(v) for k, v in weight_map.items()}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            problems.append(
                Problem("index", f"cannot read weight_map ({exc}): fetch the index again",
                        file=INDEX_FILE)
            )
        file_names = sorted(set(wanted.values()))
    elif (root / SINGLE_FILE).is_file():
        file_names = [SINGLE_FILE]
    else:
        file_names = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
        if not file_names:
            problems.append(
                Problem("no_weights", f"no {INDEX_FILE}, no {SINGLE_FILE} and no *.safetensors "
                        "in the directory: the download is incomplete or this is not the checkpoint")
            )

    files: dict[str, SafetensorsFile] = {}
    tensors: dict[str, list[TensorInfo]] = {}
    for fname in file_names:
        path = root / fname
        if not path.is_file():
            held = sum(1 for f in wanted.values() if f == fname)
            problems.append(
                Problem("missing_file", f"listed in the index for {held} tensors but not on disk: "
                        "the download is incomplete", file=fname)
            )
            continue
        try:
            sfile = read_safetensors_header(path, fname)
        except (OSError, HeaderError) as exc:
            problems.append(Problem("header", f"unreadable safetensors header: {exc}", file=fname))
            continue
        files[fname] = sfile
        problems.extend(sfile.problems)
        for info in sfile.tensors.values():
            tensors.setdefault(info.name, []).append(info)

    for name, infos in sorted(tensors.items()):
        if len(infos) > 1:
            problems.append(
                Problem("duplicate", "held by more than one file: "
                        + ", ".join(i.file for i in infos)
                        + "; the engine loads every copy, so keep it in exactly one",
                        name, expected="one file", file=infos[0].file)
            )
    for name, fname in sorted(wanted.items()):
        if fname in files and name not in files[fname].tensors:
            problems.append(
                Problem("index_mismatch", f"the index maps it to {fname}, whose header lacks it",
                        name, file=fname)
            )
    return Checkpoint(root, config, index_file, files, tensors, problems)


# ---------------------------------------------------------------------------
# PLE tables
# ---------------------------------------------------------------------------


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
    problems: list[Problem]
    warnings: list[Problem]
    shard_weights: dict[int, TensorInfo] = field(default_factory=dict, repr=False)
    shard_block_scales: dict[int, TensorInfo] = field(default_factory=dict, repr=False)
    global_scales: list[TensorInfo] = field(default_factory=list, repr=False)
    other_itemsize: int = 2  # bytes a value takes in an "other" (e.g. BF16) table

    @property
    def row_bytes(self) -> int | None:
        return row_bytes(self.layout, self.head_dim, self.other_itemsize) if self.head_dim else None

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "prefix": self.prefix,
            "layout": self.layout,
            "config_layout": self.config_layout,
            "head_dim": self.head_dim,
            "head_dim_source": self.head_dim_source,
            "row_bytes": self.row_bytes,
            "rows": self.rows,
            "rows_source": self.rows_source,
            "checkpoint_rows": self.checkpoint_rows,
            "split_ngram_parts": self.parts,
            "shards_present": len(self.shards_present),
            "shards_missing": self.shards_missing,
            "global_scale": self.global_scale,
            "disk_bytes": self.disk_bytes,
        }


def _layout_of_shard(weight: TensorInfo, has_block_scale: bool) -> str:
    if weight.dtype == NVFP4_CODES_DTYPE:
        return LAYOUT_SPLIT if has_block_scale else LAYOUT_ROWPACKED
    if weight.dtype == FP8_WEIGHT_DTYPE:
        return LAYOUT_FP8
    return LAYOUT_OTHER


def _head_dim_from_width(layout: str, width: int) -> int | None:
    if layout == LAYOUT_FP8:
        return width
    if layout == LAYOUT_SPLIT:
        return width * 2
    if layout == LAYOUT_ROWPACKED and width % 9 == 0:
        return width * 16 // 9
    return None


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
    cfg = ckpt.config
    match = PLE_TENSOR_RE.match(prefix + ".x")
    assert match is not None
    layer = int(match.group("layer"))
    problems: list[Problem] = []
    warnings: list[Problem] = []

    def full(leaf: str) -> str:
        return f"{prefix}.{leaf}"

    weights: dict[int, TensorInfo] = {}
    block_scales: dict[int, TensorInfo] = {}
    shard_globals: dict[int, TensorInfo] = {}
    table_leaves: dict[str, TensorInfo] = {}
    for leaf, info in leaves.items():
        m = SHARD_LEAF_RE.match(leaf)
        if not m:
            table_leaves[leaf] = info
            continue
        kinds = {SHARD_WEIGHT: weights, SHARD_BLOCK_SCALE: block_scales, SHARD_GLOBAL_SCALE: shard_globals}
        kinds[m.group("kind")][int(m.group("index"))] = info

    # What the tensors hold: a vote over the shards, so that one broken shard does not decide.
    votes = Counter(_layout_of_shard(w, i in block_scales) for i, w in weights.items())
    if votes:
        family = Counter({NVFP4: votes[LAYOUT_ROWPACKED] + votes[LAYOUT_SPLIT],
                          LAYOUT_FP8: votes[LAYOUT_FP8], LAYOUT_OTHER: votes[LAYOUT_OTHER]})
        best = max(family.values())
        tied = [f for f in (NVFP4, LAYOUT_FP8, LAYOUT_OTHER) if family[f] == best]
        config_family = NVFP4 if cfg.dtype_layout in NVFP4_LAYOUTS else cfg.dtype_layout
        chosen = config_family if config_family in tied else tied[0]
        if chosen == NVFP4:
            layout = LAYOUT_SPLIT if votes[LAYOUT_SPLIT] > votes[LAYOUT_ROWPACKED] else LAYOUT_ROWPACKED
        else:
            layout = chosen
    else:
        layout = LAYOUT_OTHER
        problems.append(
            Problem("no_shards", "the table has no shard_<i>.weight tensors", full("shard_0.weight"),
                    expected=f"shard_0..shard_{cfg.split_ngram_parts - 1}.weight")
        )
    nvfp4 = layout in NVFP4_LAYOUTS

    # Row width D.
    head_dim, head_dim_source = cfg.head_dim, "config"
    if head_dim is None and weights:
        widths = Counter(w.shape[1] for w in weights.values() if len(w.shape) == 2)
        if widths:
            head_dim = _head_dim_from_width(layout, widths.most_common(1)[0][0])
            head_dim_source = "tensors"
    if head_dim is not None and nvfp4 and head_dim % BLOCK:
        problems.append(
            Problem("config", f"head_dim {head_dim} is not a multiple of {BLOCK}: NVFP4 needs whole "
                    "16-value blocks", file=CONFIG_FILE)
        )
        head_dim = None

    # Config vs tensors.
    dtype_key = cfg.key_path("ple_embedding_dtype")
    want_dtype = LAYOUT_CONFIG_DTYPE.get(layout)
    if layout == LAYOUT_OTHER:
        if weights:
            problems.append(
                Problem(
                    "layout",
                    "the table's shard weights are "
                    + ", ".join(sorted({w.dtype for w in weights.values()}))
                    + ", a layout no 1Cat-vLLM reads on V100: use the NVFP4 or FP8 checkpoint",
                    full("shard_0.weight"),
                    expected=f"{NVFP4_CODES_DTYPE} [rows, D/2 + D/16] ({LAYOUT_ROWPACKED}), "
                    f"{NVFP4_CODES_DTYPE} [rows, D/2] + {BLOCK_SCALE_DTYPE} [rows, D/16] ({LAYOUT_SPLIT}) "
                    f"or {FP8_WEIGHT_DTYPE} [rows, D] ({LAYOUT_FP8})",
                )
            )
    elif cfg.dtype is None or (cfg.dtype_source == QUANT_SOURCE and cfg.dtype != want_dtype):
        why = (
            f" (quantization_config lists the table as {cfg.dtype!r}, which the engine does not key on)"
            if cfg.dtype is not None
            else ""
        )
        problems.append(
            Problem(
                "config_dtype",
                f"does not set {dtype_key}, so the engine will not read the table as {layout}{why}",
                file=CONFIG_FILE,
                expected=f"{dtype_key} = {want_dtype!r}",
            )
        )
    elif cfg.dtype != want_dtype:
        source = "" if cfg.dtype_source == dtype_key else f" (from {cfg.dtype_source})"
        problems.append(
            Problem(
                "config_dtype",
                f"says {dtype_key} = {cfg.dtype!r}{source} but the tensors hold the {layout} layout",
                file=CONFIG_FILE,
                expected=f"{dtype_key} = {want_dtype!r}",
            )
        )
    elif cfg.dtype_source == QUANT_SOURCE:
        warnings.append(
            Problem(
                "config_dtype",
                "the FP8 table is declared only in quantization_config.quantized_layers: 1Cat-vLLM "
                f"1.5.1 and later read that, 1.5.0 needs {dtype_key}",
                file=CONFIG_FILE,
                expected=f"{dtype_key} = {want_dtype!r}",
            )
        )

    # Rows: what the engine will build, else what the checkpoint adds up to.
    parts = cfg.split_ngram_parts
    ckpt_rows = sum(w.shape[0] for w in weights.values() if w.shape)
    engine_rows = engine_table_rows(cfg, layer)
    ids = cfg.get("ple_layer_ids")
    if isinstance(ids, list) and engine_rows is None and (layer + 1) not in ids:
        problems.append(
            Problem("layer", f"a PLE table for decoder layer {layer}, but ple_layer_ids {ids} "
                    f"(1-based) has no {layer + 1}: the engine has no module to load it into",
                    prefix, file=CONFIG_FILE)
        )
    absent = [i for i in range(parts) if i not in weights]
    if engine_rows is not None:
        total, rows_source = engine_rows, "config"
        if not absent and ckpt_rows != total:
            problems.append(
                Problem("rows", f"the shards add up to {ckpt_rows} rows but the engine builds "
                        f"{total} from ngram_vocab_size_base and ple_layer_ids: a checkpoint of "
                        "another model, or a config that does not belong to it", prefix,
                        expected=f"{total} rows")
            )
    else:
        rows_source = "checkpoint"
        total = ckpt_rows
        if absent:  # estimate the missing shards from the typical shard height
            heights = Counter(w.shape[0] for i, w in weights.items() if w.shape and i < parts)
            total += (heights.most_common(1)[0][0] if heights else 0) * len(absent)
    missing = [i for i in absent if shard_rows(total, parts, i) > 0]  # empty tail shards may be absent
    present = sorted(i for i in weights if i < parts)

    for i in missing:
        problems.append(
            Problem("missing_shard", f"missing: shard {i} of split_ngram_parts = {parts}",
                    full(f"shard_{i}.{SHARD_WEIGHT}"),
                    expected=_expected_weight(layout, head_dim, shard_rows(total, parts, i)))
        )
    for i in sorted(i for i in weights if i >= parts):
        problems.append(
            Problem("extra_shard", f"shard index {i} exceeds split_ngram_parts = {parts}",
                    full(f"shard_{i}.{SHARD_WEIGHT}"), expected=f"shard indices 0..{parts - 1}",
                    file=weights[i].file)
        )

    # Per-shard names, dtypes and shapes.
    for i in present:
        w = weights[i]
        rows = shard_rows(total, parts, i)
        if layout == LAYOUT_OTHER or head_dim is None:
            continue
        if layout == LAYOUT_FP8:
            want = (FP8_WEIGHT_DTYPE, (rows, head_dim))
            if w.dtype != want[0]:
                problems.append(Problem("dtype", f"is {w.describe()}", w.name, _expected_weight(layout, head_dim, rows), w.file))
            elif w.shape != want[1]:
                problems.append(Problem(_shape_code(w.shape, want[1]), f"is {w.describe()}", w.name,
                                        _expected_weight(layout, head_dim, rows), w.file))
            continue
        # NVFP4: each shard row-packed, or split (codes + block scales); the loader takes either.
        code_w, packed_w, scale_w = head_dim // 2, head_dim // 2 + head_dim // BLOCK, head_dim // BLOCK
        s = block_scales.get(i)
        split_form = w.dtype == NVFP4_CODES_DTYPE and len(w.shape) == 2 and w.shape[1] == code_w
        if s is not None and not split_form and len(w.shape) == 2 and w.shape[1] == packed_w:
            problems.append(
                Problem("mixed_shard", "a row-packed weight and a split block-scale tensor for one shard",
                        s.name, f"no {SHARD_BLOCK_SCALE} beside a row-packed {SHARD_WEIGHT}", s.file)
            )
            continue
        packed_form = w.dtype == NVFP4_CODES_DTYPE and len(w.shape) == 2 and w.shape[1] == packed_w
        if split_form or s is not None:
            form = LAYOUT_SPLIT
        elif packed_form:
            form = LAYOUT_ROWPACKED
        else:
            form = layout  # neither: judge it by the form most shards use
        if s is None and split_form:
            problems.append(
                Problem("missing_block_scale",
                        f"missing: shard_{i}.{SHARD_WEIGHT} holds only the codes ({w.describe()})",
                        full(f"shard_{i}.{SHARD_BLOCK_SCALE}"),
                        f"{BLOCK_SCALE_DTYPE} (or {NVFP4_CODES_DTYPE}) [{rows}, {scale_w}]")
            )
            continue
        exp = _expected_weight(form, head_dim, rows)
        want_shape = (rows, code_w if form == LAYOUT_SPLIT else packed_w)
        if w.dtype != NVFP4_CODES_DTYPE:
            problems.append(Problem("dtype", f"is {w.describe()}", w.name, exp, w.file))
        elif w.shape != want_shape:
            problems.append(Problem(_shape_code(w.shape, want_shape), f"is {w.describe()}", w.name, exp, w.file))
        if form == LAYOUT_SPLIT:
            exp_s = f"{BLOCK_SCALE_DTYPE} (or {NVFP4_CODES_DTYPE}) [{rows}, {scale_w}]"
            if s is None:
                problems.append(Problem("missing_block_scale", "missing", full(f"shard_{i}.{SHARD_BLOCK_SCALE}"), exp_s))
            elif s.dtype not in BLOCK_SCALE_DTYPES or s.shape != (rows, scale_w):
                problems.append(Problem("block_scale", f"is {s.describe()}", s.name, exp_s, s.file))
    if layout in (LAYOUT_FP8, LAYOUT_OTHER):
        for i, s in sorted(block_scales.items()):
            problems.append(Problem("unexpected", f"a block-scale tensor in a {layout} table", s.name,
                                    file=s.file))

    # Global scale.
    global_scale: str | None = None
    scales_used: list[TensorInfo] = []
    table_scale = table_leaves.pop(TABLE_GLOBAL_SCALE, None)
    table_fp8 = table_leaves.pop(TABLE_FP8_SCALE, None)
    if nvfp4:
        exp_one = f"{'/'.join(GLOBAL_SCALE_DTYPES)} [1]"
        candidates = ([table_scale] if table_scale else []) + [shard_globals[i] for i in sorted(shard_globals)]
        for g in candidates:
            scales_used.append(g)
            if g.numel != 1 or g.dtype not in FLOAT_DTYPES:
                problems.append(Problem("global_scale", f"is {g.describe()}", g.name, exp_one, g.file))
            elif g.dtype not in GLOBAL_SCALE_DTYPES:
                warnings.append(Problem("global_scale", f"is {g.describe()}: the loader converts it to "
                                        "FP32, but ModelOpt writes FP32", g.name, exp_one, g.file))
        if table_scale is not None:
            global_scale = "table+per_shard" if shard_globals else "table"
            if shard_globals:
                warnings.append(
                    Problem("global_scale", "both a table-level and per-shard global scales: the "
                            "loader requires them all equal (--scan compares them)", full(TABLE_GLOBAL_SCALE))
                )
        elif shard_globals:
            global_scale = "per_shard"
            for i in present:
                if i not in shard_globals:
                    warnings.append(
                        Problem("global_scale", "no per-shard global scale here while other shards "
                                "carry one (the loader needs just one)",
                                full(f"shard_{i}.{SHARD_GLOBAL_SCALE}"), exp_one)
                    )
        else:
            problems.append(
                Problem("missing_global_scale",
                        "no NVFP4 global scale: without it every value is off by ~5000x",
                        full(TABLE_GLOBAL_SCALE),
                        f"{exp_one}, or shard_<i>.{SHARD_GLOBAL_SCALE} {exp_one} per shard")
            )
        if table_fp8 is not None:
            problems.append(Problem("unexpected", f"an FP8 table scale in an NVFP4 table: the patched "
                                    "loader refuses it", table_fp8.name, file=table_fp8.file))
    elif layout == LAYOUT_FP8:
        exp_g = f"{'/'.join(FP8_SCALE_DTYPES)} [1]"
        if table_fp8 is None:
            problems.append(Problem("missing_global_scale", "missing: the FP8 table needs its global scale",
                                    full(TABLE_FP8_SCALE), exp_g))
        else:
            global_scale = "table"
            scales_used.append(table_fp8)
            if table_fp8.dtype not in FP8_SCALE_DTYPES or table_fp8.numel != 1:
                problems.append(Problem("global_scale", f"is {table_fp8.describe()}", table_fp8.name,
                                        exp_g, table_fp8.file))
        for g in ([table_scale] if table_scale else []) + [shard_globals[i] for i in sorted(shard_globals)]:
            problems.append(Problem("unexpected", "an NVFP4 global scale in an FP8 table", g.name,
                                    file=g.file))
    for leaf, info in sorted(table_leaves.items()):
        problems.append(
            Problem("unexpected", "not a tensor the PLE loader reads", info.name,
                    f"shard_<i>.{SHARD_WEIGHT}, shard_<i>.{SHARD_BLOCK_SCALE}, shard_<i>.{SHARD_GLOBAL_SCALE}, "
                    f"{TABLE_GLOBAL_SCALE} or {TABLE_FP8_SCALE}", info.file)
        )

    return TableReport(
        layer=layer, prefix=prefix, layout=layout, config_layout=cfg.dtype_layout,
        head_dim=head_dim, head_dim_source=head_dim_source, parts=parts, rows=total,
        rows_source=rows_source, checkpoint_rows=ckpt_rows, shards_present=present,
        shards_missing=missing, global_scale=global_scale,
        disk_bytes=sum(t.nbytes for t in leaves.values()),
        problems=problems, warnings=warnings, shard_weights=weights,
        shard_block_scales=block_scales, global_scales=scales_used,
        other_itemsize=max((DTYPE_BYTES.get(w.dtype, 2) for w in weights.values()), default=2),
    )


def _shape_code(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """'rows' when only the row count is off, 'width' when only the width is, else 'shape'."""
    if len(got) == 2 and len(want) == 2:
        if got[1] == want[1]:
            return "rows"
        if got[0] == want[0]:
            return "width"
    return "shape"


def _weight_width(layout: str, head_dim: int) -> int:
    if layout == LAYOUT_ROWPACKED:
        return head_dim // 2 + head_dim // BLOCK
    if layout == LAYOUT_SPLIT:
        return head_dim // 2
    return head_dim


def _expected_weight(layout: str, head_dim: int | None, rows: int) -> str:
    if head_dim is None:
        return f"[{rows}, ...]"
    if layout == LAYOUT_ROWPACKED:
        return f"{NVFP4_CODES_DTYPE} [{rows}, {_weight_width(layout, head_dim)}] (D/2 + D/16 for D = {head_dim})"
    if layout == LAYOUT_SPLIT:
        return f"{NVFP4_CODES_DTYPE} [{rows}, {head_dim // 2}] (D/2 for D = {head_dim})"
    if layout == LAYOUT_FP8:
        return f"{FP8_WEIGHT_DTYPE} [{rows}, {head_dim}]"
    return f"[{rows}, {head_dim}]"


def check_tables(ckpt: Checkpoint) -> list[TableReport]:
    """Analyze every PLE table, sorted by layer."""
    reports = [analyze_table(ckpt, prefix, leaves) for prefix, leaves in find_tables(ckpt).items()]
    return sorted(reports, key=lambda r: (r.layer, r.prefix))


def missing_tables(ckpt: Checkpoint, tables: list[TableReport]) -> list[Problem]:
    """A problem for each PLE layer of the config that has no table, or when there is none at all."""
    ids = ckpt.config.get("ple_layer_ids")
    found = {t.layer for t in tables}
    problems = []
    if isinstance(ids, list):
        for one_based in sorted({i for i in (_int(x) for x in ids) if i is not None}):
            if one_based - 1 not in found:
                problems.append(
                    Problem("missing_table", f"ple_layer_ids names layer {one_based} (1-based) but "
                            f"the checkpoint has no table for decoder layer {one_based - 1}",
                            f"...layers.{one_based - 1}.ple.ple_embedding.ngram_embedding.shard_0.weight")
                )
    if not tables and not problems:
        problems.append(
            Problem("missing_table", "no PLE table (…layers.<L>.ple.ple_embedding.ngram_embedding.*) "
                    "in the checkpoint: is this a Qwen3.8-Flash-Next checkpoint?")
        )
    return problems


# ---------------------------------------------------------------------------
# Host memory
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# --scan: stream the PLE bytes
# ---------------------------------------------------------------------------

#: E4M3 byte classes: N = NaN (0x7F, 0xFF), - = negative non-zero (0x81..0xFE), z = -0 (0x80).
_E4M3_CLASS = bytes(
    ord("N") if b in (0x7F, 0xFF) else ord("z") if b == 0x80 else ord("-") if b & 0x80 else ord(".")
    for b in range(256)
)
CHUNK_BYTES = 8 * 1024 * 1024


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
        return {
            "bytes_read": self.bytes_read,
            "block_scales": self.block_scales,
            "nan_block_scales": self.nan_block_scales,
            "negative_block_scales": self.negative_block_scales,
            "negative_zero_block_scales": self.negative_zero_block_scales,
            "fp8_values": self.fp8_values,
            "nan_fp8_values": self.nan_fp8_values,
            "global_scales": self.global_scales,
            "bad_global_scales": self.bad_global_scales,
            "tensors_with_findings": [c.to_json() for c in self.per_tensor],
        }


def _decode_scalar(raw: bytes, dtype: str) -> float:
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
            width = _weight_width(LAYOUT_ROWPACKED, t.head_dim)
            for i in sorted(t.shard_weights):
                w = t.shard_weights[i]
                s = t.shard_block_scales.get(i)
                if s is not None:
                    if s.dtype in BLOCK_SCALE_DTYPES:
                        plan.append(("block_scales", s, t))
                elif w.dtype == NVFP4_CODES_DTYPE and len(w.shape) == 2 and w.shape[1] == width:
                    plan.append(("rowpacked", w, t))
        elif t.layout == LAYOUT_FP8:
            for i in sorted(t.shard_weights):
                w = t.shard_weights[i]
                if w.dtype == FP8_WEIGHT_DTYPE:
                    plan.append(("fp8_values", w, t))
    return plan


def scan_bytes(plan: list[tuple[str, TensorInfo, TableReport]]) -> int:
    return sum(info.nbytes for _, info, _ in plan)


def scan_tables(
    ckpt: Checkpoint,
    tables: list[TableReport],
    on_bytes: Callable[[int], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> ScanResult:
    """Stream the PLE data and count NaN / negative E4M3 block scales and bad global scales.

    Memory stays bounded by ``chunk_bytes`` (plus a strided copy of the scale
    columns of one chunk). E4M3 classes: 0x7F/0xFF are NaN; a set sign bit with
    a non-zero magnitude is negative (ModelOpt never writes one: it flips the
    block's signs); 0x80 (-0) is counted apart and is not a problem, since it
    decodes every value of its block to a signed zero exactly as +0 does.
    """
    result = ScanResult()
    for what, info, table in scan_plan(ckpt, tables):
        count = ScaleCount(info.name, info.file)
        path = ckpt.root / info.file
        d = table.head_dim or 0
        if what == "rowpacked":
            row_w = _weight_width(LAYOUT_ROWPACKED, d)
            scale_cols = range(d // 2, row_w)
            unit = row_w
        elif what == "block_scales":
            unit = max(1, d // BLOCK)
        else:
            unit = max(1, d)
        step = max(unit, chunk_bytes // unit * unit)
        size = min(info.nbytes, max(0, path.stat().st_size - info.start))
        row0 = 0
        with open(path, "rb", buffering=0) as handle:
            handle.seek(info.start)
            done = 0
            while done < size:
                chunk = handle.read(min(step, size - done))
                if not chunk:
                    break
                done += len(chunk)
                result.bytes_read += len(chunk)
                rows_here = len(chunk) // unit
                if what == "fp8_values":
                    nan = chunk.count(b"\x7f") + chunk.count(b"\xff")
                    count.values += len(chunk)
                    count.nan += nan
                    if nan and count.first_nan_row is None:
                        hits = [p for p in (chunk.find(b"\x7f"), chunk.find(b"\xff")) if p >= 0]
                        count.first_nan_row = row0 + min(hits) // unit
                else:
                    if what == "rowpacked":
                        columns = [chunk[c::row_w][:rows_here] for c in scale_cols]
                    else:
                        columns = [chunk]
                    for col in columns:
                        classes = col.translate(_E4M3_CLASS)
                        count.values += len(classes)
                        nan, neg, nz = classes.count(b"N"), classes.count(b"-"), classes.count(b"z")
                        count.nan += nan
                        count.negative += neg
                        count.negative_zero += nz
                        div = 1 if what == "rowpacked" else unit
                        if nan:
                            row = row0 + classes.find(b"N") // div
                            count.first_nan_row = row if count.first_nan_row is None else min(count.first_nan_row, row)
                        if neg:
                            row = row0 + classes.find(b"-") // div
                            count.first_negative_row = (
                                row if count.first_negative_row is None else min(count.first_negative_row, row)
                            )
                row0 += rows_here
                if on_bytes is not None:
                    on_bytes(len(chunk))
        if what == "fp8_values":
            result.fp8_values += count.values
            result.nan_fp8_values += count.nan
            if count.nan:
                result.problems.append(
                    Problem("nan_values", f"{count.nan} NaN FP8 values (0x7F/0xFF), first in row "
                            f"{count.first_nan_row}", info.name, "finite values", info.file)
                )
        else:
            result.block_scales += count.values
            result.nan_block_scales += count.nan
            result.negative_block_scales += count.negative
            result.negative_zero_block_scales += count.negative_zero
            if count.nan:
                result.problems.append(
                    Problem("nan_scales", f"{count.nan} NaN block scales (E4M3 0x7F/0xFF), first in row "
                            f"{count.first_nan_row}", info.name, "finite non-negative E4M3 scales", info.file)
                )
            if count.negative:
                result.problems.append(
                    Problem("negative_scales", f"{count.negative} negative block scales, first in row "
                            f"{count.first_negative_row}", info.name, "non-negative E4M3 scales", info.file)
                )
        if count.nan or count.negative or count.negative_zero:
            result.per_tensor.append(count)

    for table in tables:
        values: list[float] = []
        for g in table.global_scales:
            try:
                with open(ckpt.root / g.file, "rb") as handle:
                    handle.seek(g.start)
                    raw = handle.read(g.nbytes)
                value = _decode_scalar(raw, g.dtype) if g.numel == 1 else None
            except (OSError, ValueError, struct.error):
                value = None
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
    return result

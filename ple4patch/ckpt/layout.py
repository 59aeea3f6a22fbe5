"""What the (patched) engine expects of a checkpoint: names, dtypes, layouts, files, row geometry.

One place for these facts; keep them aligned with ``ple4patch/kernels/nvfp4_loader.py``
(the injected loader keeps its own literals, since it must stand alone).
"""

from __future__ import annotations

from .. import geometry

import re

#: A PLE table tensor: ``<...>layers.<L>.ple.ple_embedding.ngram_embedding.<leaf>``.
PLE_TENSOR_RE = re.compile(
    r"^(?P<prefix>(?:.*\.)?layers\.(?P<layer>\d+)\.ple\.ple_embedding\.ngram_embedding)"
    r"\.(?P<leaf>.+)$"
)
#: ``ple_layer_ids`` counts decoder layers from 1, the tensor names (``layers.<L>``) from 0: the
#: engine gives decoder layer L a PLE module when ``L + 1`` is in ``ple_layer_ids``
#: (1CatAI/1Cat-vLLM a3e37865, vllm/models/qwen4_exp/nvidia/model.py, Qwen4ExpDecoderLayer:
#: ``if (self.layer_idx + 1) in ple_layer_ids``, layer_idx from the prefix ``layers.<L>``).
PLE_LAYER_ID_BASE = 1


def ple_layer_id(layer: int) -> int:
    """The ``ple_layer_ids`` entry of the table under ``layers.<layer>`` (0-based) in the tensor names."""
    return layer + PLE_LAYER_ID_BASE


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
#: Each layout in words, for messages.
LAYOUT_WORDS = {
    LAYOUT_ROWPACKED: "NVFP4 row-packed (nvfp4_rowpacked: codes and block scales side by side, one row)",
    LAYOUT_SPLIT: "NVIDIA's NVFP4 split layout (nvfp4_split: codes and block scales in separate tensors)",
    LAYOUT_FP8: "FP8 E4M3 (fp8)",
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
BLOCK = geometry.BLOCK  # values per E4M3 block scale

#: Bits per element of every dtype the safetensors format (0.8) knows; any other is refused.
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}  # fmt: skip
#: Bytes per element of the whole-byte dtypes.
DTYPE_BYTES = {name: bits // 8 for name, bits in DTYPE_BITS.items() if bits % 8 == 0}

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

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


# Row geometry lives in ple4patch.geometry (its one home); the names the checks use:
codes_width = geometry.code_bytes
scales_width = geometry.scale_bytes
rowpacked_width = geometry.row_bytes


def head_dim_from_width(layout: str, width: int) -> int | None:
    """D from a shard weight's width, where the layout determines it."""
    if layout == LAYOUT_FP8:
        return width
    if layout == LAYOUT_SPLIT:
        return width * 2
    if layout == LAYOUT_ROWPACKED and width % 9 == 0:  # 9 = 8 + 1 bytes per 16 values
        return width * 16 // 9
    return None


def weight_width(layout: str, head_dim: int) -> int:
    """Width of ``shard_<i>.weight`` in ``layout``."""
    if layout == LAYOUT_ROWPACKED:
        return rowpacked_width(head_dim)
    if layout == LAYOUT_SPLIT:
        return codes_width(head_dim)
    return head_dim


def row_bytes(layout: str, head_dim: int, other_itemsize: int = 2) -> int:
    """Bytes a row of the table takes in the engine's pinned host table for ``layout``."""
    if layout in NVFP4_LAYOUTS:  # split is repacked into row-packed rows while loading
        return rowpacked_width(head_dim)
    if layout == LAYOUT_FP8:
        return head_dim
    return head_dim * other_itemsize

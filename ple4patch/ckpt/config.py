"""Read the PLE part of ``config.json`` as the engine's PLE layer sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .access import read_inside
from .jsonread import parse_json
from .layout import (
    CONFIG_DTYPE_LAYOUT,
    CONFIG_FILE,
    DEFAULT_SPLIT_NGRAM_PARTS,
    LAYOUT_FP8,
    QUANT_ALGO_LAYOUT,
    QUANT_SOURCE,
    REQUIRED_CONFIG_KEYS,
)
from .problem import Problem

MAX_CONFIG_BYTES = 64 * 1024 * 1024  # real configs are kilobytes (a ModelOpt layer list: a few MB)
MAX_CONFIG_DEPTH = 64
#: Bounds on the numbers the PLE layer reads: far beyond any real model (Qwen3.8-Flash-Next:
#: ple_embed_dim 2560, ngram_size 3, heads_per_ngram 8, ngram_vocab_size_base 20,000,000,
#: divisible_by 128, split_ngram_parts 128), and low enough that the row arithmetic stays well
#: under a second. A value outside is refused with the reason, then treated as absent.
NUMBER_BOUNDS = {
    "ple_embed_dim": (1, 1 << 20),
    "ngram_size": (2, 64),
    "heads_per_ngram": (1, 1024),
    "ngram_vocab_size_base": (1, 1 << 36),
    "make_ngram_vocab_size_divisible_by": (1, 1 << 20),
    "split_ngram_parts": (1, 1 << 16),
}
LAYER_ID_BOUNDS = (1, 1 << 16)  # ple_layer_ids: 1-based decoder layer numbers
MAX_PLE_LAYERS = 256
#: Prime-sized head slices the row count takes: len(ple_layer_ids) x (ngram_size-1) x heads_per_ngram
#: (16 in the real model); each is one prime to find.
MAX_NGRAM_HEADS = 4096


def short(value: Any, width: int = 60) -> str:
    """repr(value), cut to ``width`` characters: a config value in a one-line message."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


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
    numbers: dict[str, int] = field(default_factory=dict)  # the bounded keys whose values are usable
    layer_ids: list[int] | None = None  # ple_layer_ids, sorted, when usable
    head_sizes: list[int] | None = None  # gguf_ple_constants.ngram_heads_vocab_sizes, when given and usable
    rows_computable: bool = True  # False when the row arithmetic would take more primes than any real model

    def get(self, key: str) -> Any:
        return self.text.get(key)

    @property
    def names_ple(self) -> bool:
        """Whether config.json speaks of a PLE table at all: a key the PLE layer reads, or a
        ple_embedding_dtype (a checkpoint of another model has none of them)."""
        keys = REQUIRED_CONFIG_KEYS + ("ple_embedding_dtype", "split_ngram_parts")
        return self.dtype is not None or any(
            where.get(key) is not None for where in (self.text, self.raw) for key in keys)

    @property
    def parts_known(self) -> bool:
        """Whether split_ngram_parts says how many shards the table has: given, or left to the
        engine's default by a config that gives the PLE layer's other keys. A config that lacks
        them (a PLE table beside another model's config.json) says nothing about the shards, and
        its missing keys are the problems to report."""
        return not self.split_ngram_parts_default or all(self.text.get(k) is not None for k in REQUIRED_CONFIG_KEYS)

    def number(self, key: str) -> int | None:
        return self.numbers.get(key)

    def key_path(self, key: str) -> str:
        return f"{self.text_key}.{key}" if self.text_key else key


def as_int(value: Any) -> int | None:
    """An integer config value (a float with no fraction counts; a bool does not), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def load_config(root: Path) -> dict[str, Any]:
    """config.json as a dict; raises ValueError (with a one-line reason) when unreadable."""
    path = root / CONFIG_FILE
    data = read_inside(root, CONFIG_FILE, MAX_CONFIG_BYTES)  # AccessError (a ValueError) says why not
    try:
        raw = parse_json(data, max_depth=MAX_CONFIG_DEPTH)
    except ValueError as exc:
        raise ValueError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: not a JSON object")
    return raw


def _dtype(raw: dict[str, Any], text: dict[str, Any], text_key: str, path, problems: list[Problem]):
    """(ple_embedding_dtype, where it came from, the layout it selects)."""
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
        return dtype, source, CONFIG_DTYPE_LAYOUT.get(dtype)
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
    return dtype, source, layout


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

    dtype, source, layout = _dtype(raw, text, text_key, path, problems)
    numbers = _numbers(text, path, problems)
    layer_ids = _layer_ids(text.get("ple_layer_ids"), path("ple_layer_ids"), problems)
    head_sizes = _head_sizes(text.get("gguf_ple_constants"), path("gguf_ple_constants"), problems)
    ngram_heads = None
    if layer_ids is not None and "ngram_size" in numbers and "heads_per_ngram" in numbers:
        ngram_heads = len(layer_ids) * (numbers["ngram_size"] - 1) * numbers["heads_per_ngram"]
        if ngram_heads > MAX_NGRAM_HEADS and head_sizes is None:
            problems.append(
                Problem("config", f"{len(layer_ids)} PLE layers x (ngram_size-1) x heads_per_ngram = "
                        f"{ngram_heads:,} n-gram heads, more than any real model ({MAX_NGRAM_HEADS:,} at most): "
                        "the table size cannot be derived; use the model's published config",
                        file=CONFIG_FILE)
            )

    head_dim = None
    embed, ngram, heads = (numbers.get(k) for k in ("ple_embed_dim", "ngram_size", "heads_per_ngram"))
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
    parts = DEFAULT_SPLIT_NGRAM_PARTS if parts_default else numbers.get("split_ngram_parts")
    if parts is None:
        parts = DEFAULT_SPLIT_NGRAM_PARTS
    return PleConfig(raw, text, text_key, dtype, source, layout, head_dim, parts, parts_default, problems,
                     numbers=numbers, layer_ids=layer_ids, head_sizes=head_sizes,
                     rows_computable=ngram_heads is None or ngram_heads <= MAX_NGRAM_HEADS or head_sizes is not None)


def _numbers(text: dict[str, Any], path, problems: list[Problem]) -> dict[str, int]:
    """The bounded integer keys that are present and usable; a problem for each that is not."""
    numbers: dict[str, int] = {}
    for key, (low, high) in NUMBER_BOUNDS.items():
        value = text.get(key)
        if value is None:
            continue
        number = as_int(value)
        if key == "split_ngram_parts" and (number is None or number <= 0):
            problems.append(Problem("config", f"split_ngram_parts {short(value)} is not a positive integer",
                                    file=CONFIG_FILE))
        elif number is None:
            problems.append(Problem("config", f"{path(key)} {short(value)} is not an integer", file=CONFIG_FILE,
                                    expected="the value from the model's published config"))
        elif not low <= number <= high:
            problems.append(Problem("config", f"{path(key)} {short(value)} is outside {low:,}..{high:,}, "
                                    "beyond any real model: use the model's published config",
                                    file=CONFIG_FILE))
        else:
            numbers[key] = number
    return numbers


def _layer_ids(value: Any, where: str, problems: list[Problem]) -> list[int] | None:
    """ple_layer_ids sorted and unique, when it is a list of layer numbers no real model exceeds."""
    if value is None:
        return None
    low, high = LAYER_ID_BOUNDS
    ids = [as_int(x) for x in value] if isinstance(value, list) and len(value) <= MAX_PLE_LAYERS else None
    if ids is None or any(i is None or not low <= i <= high for i in ids):
        problems.append(Problem("config", f"{where} {short(value)} is not a list of at most {MAX_PLE_LAYERS} "
                                f"1-based layer numbers ({low}..{high:,})", file=CONFIG_FILE))
        return None
    return sorted(set(ids))  # type: ignore[arg-type]


def _head_sizes(constants: Any, where: str, problems: list[Problem]) -> list[int] | None:
    """gguf_ple_constants.ngram_heads_vocab_sizes, when given as a list of sane sizes."""
    if not isinstance(constants, dict) or not constants.get("ngram_heads_vocab_sizes"):
        return None
    value = constants["ngram_heads_vocab_sizes"]
    high = NUMBER_BOUNDS["ngram_vocab_size_base"][1] * 2
    sizes = [as_int(x) for x in value] if isinstance(value, list) and len(value) <= MAX_NGRAM_HEADS else None
    if sizes is None or any(n is None or not 1 <= n <= high for n in sizes):
        problems.append(Problem("config", f"{where}.ngram_heads_vocab_sizes {short(value)} is not a list of at "
                                f"most {MAX_NGRAM_HEADS:,} sizes (1..{high:,})", file=CONFIG_FILE))
        return None
    return sizes  # type: ignore[return-value]

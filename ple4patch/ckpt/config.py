"""Read the PLE part of ``config.json`` as the engine's PLE layer sees it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
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

    head_dim = None
    embed, ngram, heads = (as_int(text.get(k)) for k in ("ple_embed_dim", "ngram_size", "heads_per_ngram"))
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
    parts = DEFAULT_SPLIT_NGRAM_PARTS if parts_default else as_int(parts_value)
    if parts is None or parts <= 0:
        problems.append(
            Problem("config", f"split_ngram_parts {parts_value!r} is not a positive integer",
                    file=CONFIG_FILE)
        )
        parts = DEFAULT_SPLIT_NGRAM_PARTS
    return PleConfig(raw, text, text_key, dtype, source, layout, head_dim, parts, parts_default, problems)

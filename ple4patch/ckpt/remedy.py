"""What to do about a checkpoint problem: the action a preflight blocker's `change:` names.

A problem says what is wrong and what was expected (``Problem.expected``, a shape or a value);
this says what to do, from the same facts: re-download a file, take the published config, export
the table again, or use the model's NVFP4 or FP8 checkpoint.
"""

from __future__ import annotations

from .layout import CONFIG_FILE, INDEX_FILE
from .problem import Problem

USE_A_READABLE_CHECKPOINT = "use the model's NVFP4 or FP8 checkpoint"  # the problem says why: no engine reads its dtype

# A tensor the loader needs is absent: the download (or the export) left it out.
_MISSING_TENSOR = ("missing_shard", "missing_block_scale", "missing_global_scale", "no_shards", "missing_table")
# A file that cannot be read as it should: the download is incomplete or damaged.
_BAD_FILE = ("missing_file", "header", "truncated", "index_mismatch", "outside", "not_a_file", "scan")
# A tensor that is there but holds the wrong thing: the table was written wrong.
_WRONG_TENSOR = ("dtype", "shape", "rows", "width", "block_scale", "global_scale", "global_scale_value",
                 "mixed_shard", "extra_shard", "nan_values", "nan_scales", "negative_scales")
# What config.json must say, in the problem's own words: the clause that starts with one of these.
_CONFIG_ACTIONS = ("add ", "set ", "move ", "use ")


def short_name(tensor: str) -> str:
    """A table tensor from ``ngram_embedding.`` on (the full name is in the problem's line)."""
    at = tensor.find("ngram_embedding")
    return tensor[at:] if at >= 0 else tensor


def _expected(p: Problem) -> str:
    return f" (expected {p.expected})" if p.expected else ""


def _config_action(p: Problem) -> str:
    """The action a config.json problem names itself ("add ... to ... of config.json"), else
    taking the published config."""
    for sep in ("; ", ": "):
        clause = p.message.rsplit(sep, 1)[-1]
        if clause.startswith(_CONFIG_ACTIONS):
            return clause if CONFIG_FILE in clause else f"{CONFIG_FILE}: {clause}"
    return f"take {CONFIG_FILE} from the model's published checkpoint ({p.message})"


def change_of(p: Problem) -> str:
    """The action that removes problem `p`, in one line."""
    tensor = short_name(p.tensor) if p.tensor else None
    if p.code == "layout":
        return USE_A_READABLE_CHECKPOINT
    if p.code in _MISSING_TENSOR and tensor:
        return f"re-download the checkpoint file that should hold {tensor}{_expected(p)}"
    if p.code in _MISSING_TENSOR:
        return "pass the directory of the Qwen3.8-Flash-Next checkpoint (re-download it if this is the one)"
    if p.code == "index":
        return f"re-download {INDEX_FILE}"
    if p.code == "no_weights":
        return "download the checkpoint's safetensors files into this directory"
    if p.code in _BAD_FILE:
        return f"re-download {p.file or 'the checkpoint'}" + (f" (it should hold {tensor})" if tensor else "")
    if p.code == "duplicate" and tensor:
        return f"keep {tensor} in one file only (re-download the checkpoint)"
    if p.code == "unexpected" and tensor:
        return f"re-download the checkpoint, or export the table again without {tensor}"
    if p.code in _WRONG_TENSOR and tensor:
        where = p.file or "the checkpoint"
        return f"re-download {where}, or export the table again: {tensor} should be {p.expected or 'as the loader reads it'}"
    if p.code in ("config", "config_dtype", "layer"):
        return _config_action(p)
    return f"re-download the checkpoint ({p.message})"

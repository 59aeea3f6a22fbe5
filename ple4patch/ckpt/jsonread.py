"""Parse the checkpoint's JSON (config, index, safetensors headers) with bounded depth and clear errors.

``strict`` parses as the safetensors library's JSON reader (serde_json) does:
no NaN/Infinity, integers are unsigned or they are not integers (``-0`` and
``-1`` are refused for a shape), no lone UTF-16 surrogates, and objects keep
the values a duplicate key replaced (:class:`JsonObject`), which serde still
checks.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: serde_json's recursion limit, measured against safetensors 0.8: 127 levels parse, 128 do not.
STRICT_MAX_DEPTH = 127
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class JsonError(ValueError):
    """Bytes that are not the JSON they should be; the message says why in a few words."""


class JsonObject(dict):
    """A JSON object that remembers the values its later duplicate keys replaced (``shadowed``)."""

    shadowed: list[tuple[str, Any]]


def _object(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj = JsonObject()
    obj.shadowed = []
    for key, value in pairs:
        if key in obj:
            obj.shadowed.append((key, obj[key]))
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _int_or_float(digits: str) -> int | float:
    # serde reads a negative literal as a signed (or, for -0, a float) value: never a usize.
    return float(digits) if digits.startswith("-") else int(digits)


def _check_tree(value: Any, max_depth: int, check_strings: bool) -> None:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > max_depth:
                raise JsonError(f"nested deeper than {max_depth} levels")
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in items:
                if check_strings and isinstance(key, str):
                    _check_string(key)
                if isinstance(child, (dict, list)) or (check_strings and isinstance(child, str)):
                    stack.append((child, depth + 1))
        elif check_strings and isinstance(node, str):
            _check_string(node)


def _check_string(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonError(f"a string holds a lone UTF-16 surrogate ({text!r}): not valid Unicode") from None


def parse_json(data: bytes, *, max_depth: int, strict: bool = False) -> Any:
    """The JSON value in ``data`` (UTF-8), or JsonError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    hooks: dict[str, Any] = (
        {"parse_constant": _reject_constant, "parse_int": _int_or_float, "object_pairs_hook": _object}
        if strict else {}
    )
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        raise JsonError(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise JsonError(f"not valid JSON ({exc})") from None
    _check_tree(value, max_depth, check_strings=bool(_SURROGATE_ESCAPE.search(text)))
    return value

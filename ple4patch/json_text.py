"""JSON output that is valid Unicode whatever bytes a path holds, and loses none of them.

A path is bytes. Python names a byte of one that is not UTF-8 (a venv under a directory named
``b"\\xff"``) by a lone surrogate (``os.fsdecode``'s surrogateescape: byte 0xHH is U+DCHH), which
``json.dumps`` writes as ``"\\udcff"``: valid JSON, but no valid Unicode, and strict decoders
refuse it. `escape` writes each string holding one so: every such byte as ``\\xHH`` (two
lowercase hex digits; a lone surrogate of another origin, U+D800-U+DFFF outside that range, as
``\\uHHHH``) and every backslash of its own as ``\\\\``; strings without one are left as they are.
It returns the JSON Pointers (RFC 6901) of the strings it escaped, which the JSON object lists
(``escaped_strings``), so a reader knows which to read back: `unescape` gives the string Python
had (``os.fsencode`` of it: the path's bytes). Member names are escaped alike (ple4patch's own are
ASCII) and not listed.
"""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|(\\))")


def needs_escape(text: str) -> bool:
    """Whether `text` holds a lone surrogate (an undecodable byte of a path): no valid Unicode."""
    return _LONE_SURROGATE.search(text) is not None


def escape_text(text: str) -> str:
    """`text` as valid Unicode: each undecodable byte ``\\xHH``, another lone surrogate
    ``\\uHHHH``, each backslash ``\\\\``. Only for a string that `needs_escape`."""
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def unescape(text: str) -> str:
    """The string `escape_text` was given (``os.fsencode`` of a path's: its bytes)."""

    def back(m: re.Match) -> str:
        if m.group(1):
            return chr(0xDC00 + int(m.group(1), 16))
        if m.group(2):
            return chr(int(m.group(2), 16))
        return "\\"

    return _ESCAPE.sub(back, text)


def _token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def escape(value: object) -> tuple[object, list[str]]:
    """`value` (JSON data: dicts, lists, strings, numbers) with every string valid Unicode, and
    the JSON Pointers of the strings escaped. `value` itself is left as it is."""
    where: list[str] = []

    def walk(v: object, pointer: str) -> object:
        if isinstance(v, str):
            if needs_escape(v):
                where.append(pointer)
                return escape_text(v)
            return v
        if isinstance(v, dict):
            out = {}
            for k, item in v.items():
                name = escape_text(k) if isinstance(k, str) and needs_escape(k) else k
                out[name] = walk(item, f"{pointer}/{_token(str(name))}")
            return out
        if isinstance(v, (list, tuple)):
            return [walk(item, f"{pointer}/{i}") for i, item in enumerate(v)]
        return v

    return walk(value, ""), where

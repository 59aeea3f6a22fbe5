"""The shape a manifest's JSON must have (types and sizes), checked before it is parsed.

`problem(data)` returns None for data of the right shape, else one sentence saying what is
wrong (the JSON path, what was expected, what was found). It never raises: a manifest or
local pins file with a list where an object belongs, a number where text belongs, a boolean
for a number, or absurd sizes is a clear refusal, never an internal error. See
`ple4patch.manifest` for what each field means.
"""

from __future__ import annotations

MAX_PINS = 10_000
MAX_TEXT = 10_000  # label, note
MAX_RANGE = 1_000  # engine_versions (parsed by packaging)
MAX_ID = 200  # patch ids
MAX_FILE_SIZE = 1 << 30  # a pin's "size": no engine source file is near 1 GiB


def _type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "text", int: "an integer", float: "a number"}.get(
        type(value), type(value).__name__)


def _text(value: object, where: str, limit: int, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        return f"{where} must be text, got {_type(value)}"
    if len(value) > limit:
        return f"{where} is longer than {limit} characters"
    return None


def problem(data: object) -> str | None:
    """None if `data` has the shape of a ple4patch manifest, else what is wrong."""
    if not isinstance(data, dict):
        return f"the top level must be an object, got {_type(data)}"
    version = data.get("schema_version")
    if type(version) is not int:
        return f"schema_version must be an integer, got {_type(version)}"
    if "target" in data and not isinstance(data["target"], str):
        return f"target must be text, got {_type(data['target'])}"
    pins = data.get("pins")
    if not isinstance(pins, dict):
        return f"pins must be an object keyed by pristine sha256, got {_type(pins)}"
    if len(pins) > MAX_PINS:
        return f"pins has more than {MAX_PINS} entries"
    for key, entry in pins.items():
        where = f"pins[{key[:16]!r}]"
        if not isinstance(entry, dict):
            return f"{where} must be an object, got {_type(entry)}"
        for field, limit, optional in (
            ("label", MAX_TEXT, False),
            ("patch_id", MAX_ID, False),
            ("patched_sha256", 64, False),
            ("engine_versions", MAX_RANGE, True),
            ("note", MAX_TEXT, True),
        ):
            bad = _text(entry.get(field), f"{where}.{field}", limit, optional=optional)
            if bad:
                return bad
        size = entry.get("size")
        if size is not None and (type(size) is not int or not 0 <= size <= MAX_FILE_SIZE):
            return f"{where}.size must be a byte count (an integer 0..{MAX_FILE_SIZE}), got {_type(size)}" + (
                f" {size}" if type(size) is int else "")
        older = entry.get("older")
        if older is not None:
            if not isinstance(older, dict):
                return f"{where}.older must be an object, got {_type(older)}"
            if len(older) > MAX_PINS:
                return f"{where}.older has more than {MAX_PINS} entries"
            for patch_id, sha in older.items():
                if len(patch_id) > MAX_ID:
                    return f"{where}.older has a patch id longer than {MAX_ID} characters"
                bad = _text(sha, f"{where}.older[{patch_id[:16]!r}]", 64)
                if bad:
                    return bad
    return None

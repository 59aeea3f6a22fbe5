"""Every --json object the tests read is checked against the shipped JSON Schema
(`ple4patch/schema/output.schema.json`): `kit.json_of` and `kit.check_json` call `validate`."""

from __future__ import annotations

import functools

import jsonschema

from ple4patch import schema


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    doc = schema.load()
    jsonschema.Draft202012Validator.check_schema(doc)
    return jsonschema.Draft202012Validator(doc)


def schema_errors(obj: dict) -> list[str]:
    """What is wrong with `obj` against the schema, one line per error (empty: valid)."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in sorted(validator().iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    ]


def validate(obj: dict) -> dict:
    """`obj`, after checking it against the schema (AssertionError naming every problem)."""
    errors = schema_errors(obj)
    assert not errors, "not valid against ple4patch/schema/output.schema.json:\n  " + "\n  ".join(errors)
    return obj

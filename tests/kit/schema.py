"""Every --json object the tests read is checked against the shipped JSON Schema
(`ple4patch/schema/output.schema.json`): `kit.json_of` and `kit.check_json` call `validate`."""

from __future__ import annotations

import functools

from ple4patch import schema


@functools.lru_cache(maxsize=1)
def validator():
    """The schema's validator (jsonschema is imported here, by the tests that read JSON: the
    kernel-only run under the newest Triton has no jsonschema and needs none)."""
    import jsonschema

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

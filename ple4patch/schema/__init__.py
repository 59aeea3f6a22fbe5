"""Data only: the JSON Schema of every ``--json`` object (``output.schema.json``), shipped with
ple4patch so that scripts can validate what they read."""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("output.schema.json")


def load() -> dict:
    """The schema, parsed."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))

"""The one content hash ple4patch uses: sha256, as lowercase hex."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str | None:
    """The sha256 of a file's bytes, or None when it cannot be read (absent, not a file...)."""
    try:
        return sha256_hex(path.read_bytes())
    except OSError:
        return None

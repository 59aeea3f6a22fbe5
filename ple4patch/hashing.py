"""The one content hash ple4patch uses: sha256, as lowercase hex."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str | None:
    """The sha256 of a regular file's bytes, or None when it cannot be read (absent, not a
    regular file...). Never blocks on a FIFO (the open is non-blocking, checked by fstat)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)

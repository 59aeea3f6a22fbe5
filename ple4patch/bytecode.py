"""The target's bytecode cache: which `__pycache__` files are stale, and removing them.

A pyc's 16-byte header (PEP 552) is read in one place, `PycHeader.parse`: magic number,
flags (bit 0: hash-based, bit 1: checked), then a source hash, or a source mtime and size.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from . import fsio
from .paths import pycs

HEADER_SIZE = 16


@dataclass(frozen=True)
class PycHeader:
    magic: bytes
    flags: int
    key: bytes  # bytes 8..16: the source hash, or mtime (4 bytes) + size (4 bytes)

    @classmethod
    def parse(cls, head: bytes) -> "PycHeader | None":
        """The header of a pyc from its first bytes; None when too short (rejected at import)."""
        if len(head) < HEADER_SIZE:
            return None
        return cls(head[:4], int.from_bytes(head[4:8], "little"), head[8:16])

    @classmethod
    def read(cls, pyc: Path) -> "PycHeader | None":
        """The header of a pyc file; None when unreadable or too short."""
        try:
            with open(pyc, "rb") as fh:
                return cls.parse(fh.read(HEADER_SIZE))
        except OSError:
            return None

    @property
    def hash_based(self) -> bool:
        return bool(self.flags & 0b1)

    @property
    def checked(self) -> bool:
        return bool(self.flags & 0b10)

    @property
    def this_python(self) -> bool:
        return self.magic == importlib.util.MAGIC_NUMBER

    def hash_matches(self, source: bytes) -> bool:
        return self.this_python and self.key == importlib.util.source_hash(source)

    def is_of(self, source: bytes, st: os.stat_result) -> bool:
        """Would the interpreter run this pyc for `source`, and is it really compiled from it?

        Timestamp pycs and checked-hash pycs are validated by the interpreter at import, but an
        unchecked-hash pyc (reproducible/distro builds) is used whatever the source says: one
        left from the old bytes would keep running the old code.
        """
        if self.hash_based:
            if self.this_python:
                return self.hash_matches(source)
            return self.checked  # another Python's: only a checked one is safe to keep
        mtime = int.from_bytes(self.key[:4], "little")
        size = int.from_bytes(self.key[4:8], "little")
        return mtime == int(st.st_mtime) & 0xFFFFFFFF and size == st.st_size & 0xFFFFFFFF


def clean_pycache(target: Path) -> list[Path]:
    """Remove `__pycache__/<stem>.*.pyc` of the target (stale bytecode)."""
    return fsio.unlink_all(pycs(target))


def stale_pycache(target: Path) -> list[Path]:
    """The target's pycs that are not provably compiled from its current bytes (reads only)."""
    try:
        source = target.read_bytes()
        st = os.stat(target)
    except OSError:
        return []
    stale = []
    for pyc in pycs(target):
        header = PycHeader.read(pyc)
        if header is None or not header.is_of(source, st):
            stale.append(pyc)
    return stale


def unchecked_stale_pycache(target: Path) -> list[Path]:
    """The target's stale pycs that an interpreter would run without checking them against the
    source (unchecked-hash pycs not compiled from its current bytes). Timestamp and
    checked-hash pycs are validated at import, so a stale one only costs a recompile."""
    try:
        source = target.read_bytes()
    except OSError:
        return []
    out = []
    for pyc in pycs(target):
        header = PycHeader.read(pyc)
        if header is None:
            continue  # unreadable, or rejected at import
        if header.hash_based and not header.checked and not header.hash_matches(source):
            out.append(pyc)
    return out


def clean_stale_pycache(target: Path) -> list[Path]:
    """Remove the target's pycs that are not provably compiled from its current bytes.

    For runs that find nothing to write (already patched, nothing to revert): a run killed
    between the replace and `clean_pycache` leaves stale bytecode behind it.
    """
    return fsio.unlink_all(stale_pycache(target))

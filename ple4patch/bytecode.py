"""The target's bytecode cache: which `__pycache__` files are stale, and removing them.

A pyc's 16-byte header (PEP 552) is read in one place, `PycHeader.parse`: magic number,
flags (bit 0: hash-based, bit 1: checked), then a source hash, or a source mtime and size.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from . import fsio, readfile, shell
from .errors import StaleBytecode
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
        try:  # never blocks on a FIFO, never reads a device
            return cls.parse(readfile.read_regular(pyc, head=HEADER_SIZE))
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


def would_run_instead(pyc: Path, source: bytes | None) -> bool:
    """Would an interpreter run this pyc without checking it against `source`, and is it not
    compiled from `source`? (An unchecked-hash pyc of other bytes; another Python's unchecked
    pyc counts too, since its source hash cannot be checked here.)"""
    header = PycHeader.read(pyc)
    if header is None or not header.hash_based or header.checked:
        return False  # unreadable / not a pyc (rejected at import), or validated at import
    return source is None or not header.hash_matches(source)


def _unlink_pyc(pyc: Path) -> None:
    """Remove one pyc; never through a symlinked `__pycache__` (that would write outside
    site-packages): that is an OSError like any other failure to remove it."""
    cache = pyc.parent
    if os.path.islink(cache):
        raise OSError(errno.EXDEV, f"{cache} is a symlink (to {os.readlink(cache)}); ple4patch does not "
                                   f"write outside site-packages")
    os.unlink(pyc)


def _owner(path: Path) -> str:
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def clean_pycache_noted(target: Path, *, venv: Path | None = None) -> tuple[list[Path], list[str]]:
    """Remove every `__pycache__/<stem>.*.pyc` of the target, after it was written.

    Returns (removed, notes). A pyc that cannot be removed but cannot change what Python runs
    (a timestamp or checked-hash pyc, validated at import; something that is not a pyc) is a
    note. One the interpreter would run instead of the new bytes (an unchecked-hash pyc of
    other bytes) raises StaleBytecode: the target is written, Python would run the old code.
    """
    removed: list[Path] = []
    notes: list[str] = []
    blocking: list[tuple[Path, str]] = []
    try:
        source: bytes | None = readfile.read_regular(target)
    except OSError:
        source = None
    for pyc in pycs(target):
        try:
            _unlink_pyc(pyc)
            removed.append(pyc)
            continue
        except FileNotFoundError:
            continue
        except OSError as exc:
            why = exc.strerror or str(exc)
        if would_run_instead(pyc, source):
            blocking.append((pyc, why))
        else:
            notes.append(f"could not remove {pyc} ({why}); harmless: Python checks it against the "
                         f"source, or cannot use it, and compiles the file itself")
    if removed:
        with contextlib.suppress(OSError):
            fsio.fsync_dir(target.parent / "__pycache__")
    if blocking:
        pyc, why = blocking[0]
        again = shell.ple4patch('apply', venv) if venv is not None else "the same ple4patch command"
        raise StaleBytecode(
            f"{target} holds its new bytes, but {pyc} is an unchecked-hash pyc of other bytes that "
            f"Python would run instead of the file, and it cannot be removed ({why}): run `{again}` "
            f"again as a user who can write in {pyc.parent} (its owner: {_owner(pyc.parent)})"
        )
    return removed, notes


def clean_pycache(target: Path) -> list[Path]:
    """Remove `__pycache__/<stem>.*.pyc` of the target (stale bytecode); see `clean_pycache_noted`."""
    return clean_pycache_noted(target)[0]


def stale_pycache(target: Path) -> list[Path]:
    """The target's pycs that are not provably compiled from its current bytes (reads only)."""
    try:
        source = readfile.read_regular(target)
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
        source = readfile.read_regular(target)
    except OSError:
        return []
    return [pyc for pyc in pycs(target) if would_run_instead(pyc, source)]


def clean_stale_pycache(target: Path) -> list[Path]:
    """Remove the target's pycs that are not provably compiled from its current bytes.

    For runs that find nothing to write (already patched, nothing to revert): a run killed
    between the replace and `clean_pycache` leaves stale bytecode behind it. A harmless one
    that cannot be removed stays (the next run does not fail on it); one Python would run
    instead of the file raises StaleBytecode.
    """
    try:
        source: bytes | None = readfile.read_regular(target)
    except OSError:
        source = None
    removed = []
    for pyc in stale_pycache(target):
        try:
            _unlink_pyc(pyc)
            removed.append(pyc)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if would_run_instead(pyc, source):
                raise StaleBytecode(
                    f"{pyc} is an unchecked-hash pyc of other bytes than {target}: Python would run it "
                    f"instead of the file, and it cannot be removed ({exc.strerror or exc}): run the "
                    f"same ple4patch command again as a user who can write in {pyc.parent} (its "
                    f"owner: {_owner(pyc.parent)})"
                ) from None
    return removed

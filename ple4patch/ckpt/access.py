"""Open the checkpoint's files safely: only inside CHECKPOINT_DIR, only regular files, never blocking.

Every file ``inspect`` reads (config.json, the index, each safetensors file)
comes through :func:`open_inside`. A name that is absolute, climbs out with
``..`` or resolves through a symlink to a place outside the directory is
refused before anything is opened; so is anything that is not a regular file
(a FIFO, a device, a socket, a directory), found with a non-blocking open and
``fstat`` so that a FIFO cannot hang the command. The one place outside that
counts as inside is the Hugging Face cache's own layout: a checkpoint directory
``<repo>/snapshots/<revision>/`` whose files are symlinks into ``<repo>/blobs/``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..readfile import kind_of as what_is  # a file type in words, for "X is <what>, not a regular file"

# O_NOFOLLOW: the path opened is already resolved, so a symlink there now was swapped in since.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class AccessError(ValueError):
    """A file inspect will not read. ``code``: outside, not_a_file, missing, unreadable or too_large;
    the message is a predicate to put after the file's name ("is a FIFO (named pipe), not a regular file")."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def allowed_roots(root: Path) -> list[Path]:
    """The resolved checkpoint directory, and the blobs folder when it is a Hugging Face cache snapshot."""
    real = Path(os.path.realpath(root))
    roots = [real]
    if real.parent.name == "snapshots":
        blobs = real.parent.parent / "blobs"
        if blobs.is_dir():
            roots.append(Path(os.path.realpath(blobs)))
    return roots


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def resolve_inside(root: Path, name: str) -> Path:
    """The real path of ``name`` (relative to ``root``), or AccessError when it is not inside."""
    if not name or "\x00" in name:
        raise AccessError("outside", "is not a file name")
    if PurePosixPath(name).is_absolute():
        raise AccessError("outside", "is an absolute path: inspect reads only files inside "
                          "the checkpoint directory, named relative to it")
    if PurePosixPath(os.path.normpath(name)).parts[:1] == ("..",):
        raise AccessError("outside", "climbs out of the checkpoint directory with '..': "
                          "inspect reads only files inside it")
    roots = allowed_roots(root)
    real = Path(os.path.realpath(Path(root) / name))
    if not _within(real, roots):
        raise AccessError("outside", f"resolves through a symlink to {real}, outside the checkpoint "
                          "directory: inspect reads only files inside it; copy the file in")
    if not os.path.lexists(real) and os.path.islink(Path(root) / name):
        raise AccessError("missing", "is a dangling symlink")
    return real


def open_regular(path: Path) -> BinaryIO:
    """Open ``path`` for reading without blocking; AccessError unless it is a regular file."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise AccessError("missing", "is not there") from None
        if exc.errno == errno.ENXIO:  # a socket
            try:
                found = what_is(os.stat(path).st_mode)
            except OSError:
                found = "not a regular file"
            raise AccessError("not_a_file", f"is {found}, not a regular file") from None
        raise AccessError("unreadable", f"cannot be read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise AccessError("not_a_file", f"is {what_is(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def open_inside(root: Path, name: str) -> BinaryIO:
    """Open ``root/name`` for reading, if and only if it is a regular file inside ``root``."""
    return open_regular(resolve_inside(root, name))


def exists(root: Path, name: str) -> bool:
    """Whether anything (a dangling symlink included) is at ``root/name``."""
    return os.path.lexists(Path(root) / name)


def read_bounded(handle: BinaryIO, limit: int) -> bytes:
    """The whole file, or AccessError when it holds more than ``limit`` bytes."""
    data = bytearray()
    if os.fstat(handle.fileno()).st_size > limit:
        raise AccessError("too_large", f"holds {os.fstat(handle.fileno()).st_size:,} bytes, far more than "
                          f"any real one ({limit:,} at most): not the file inspect expects")
    while len(data) <= limit:  # and a file that grows while read stops there too
        chunk = handle.read(min(1 << 20, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
    raise AccessError("too_large", f"holds more than {limit:,} bytes, far more than any real one: "
                      "not the file inspect expects")


def read_inside(root: Path, name: str, limit: int) -> bytes:
    """The bytes of ``root/name`` (a regular file inside root, at most ``limit`` bytes)."""
    with open_inside(root, name) as handle:
        return read_bounded(handle, limit)

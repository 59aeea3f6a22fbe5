"""Read a file without blocking, only if it is a regular file, and never more than a bound.

Every file ple4patch reads in a venv (the target, its backup, RECORD, METADATA, pycs, the
local pins, extra manifests) comes through `read_regular`: it opens with `O_NONBLOCK` (a
FIFO never blocks the open), checks with `fstat` on the opened descriptor that it is a
regular file (a FIFO, device, socket or directory is `NotRegular`, naming what was found),
and reads at most `limit` bytes (`TooLarge` beyond). `follow=False` adds `O_NOFOLLOW`: a
symlink is `NotRegular` too. Both errors are `OSError`s, so callers that treat "cannot
read" one way keep doing so; the message names the path and what is there.

`load_json` parses JSON read this way with bounded work: a size limit, a nesting limit
(checked before parsing, so no RecursionError), and integers of at most 4300 digits
(Python's own limit, a ValueError).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

MiB = 1 << 20
DEFAULT_LIMIT = 64 * MiB  # no file ple4patch reads in a real venv is near this
JSON_LIMIT = 16 * MiB
JSON_MAX_DEPTH = 64

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symlink"),
)


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO (named pipe)", "a regular file"...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


class NotRegular(OSError):
    """Something other than a regular file is where a file belongs."""

    def __init__(self, path: Path | str, found: str) -> None:
        super().__init__(errno.EINVAL, f"{found}, not a regular file", str(path))
        self.path = Path(path)
        self.found = found

    def __str__(self) -> str:
        return f"{self.path} is {self.found}, not a regular file"


class TooLarge(OSError):
    def __init__(self, path: Path | str, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit} bytes", str(path))
        self.path = Path(path)
        self.limit = limit

    def __str__(self) -> str:
        return f"{self.path} is larger than {self.limit} bytes"


def what_is(path: Path | str) -> str | None:
    """What is at `path` without following a symlink ("a FIFO (named pipe)", ...); None if absent."""
    try:
        return kind_of(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


def read_regular(path: Path | str, *, limit: int = DEFAULT_LIMIT, follow: bool = True,
                 head: int | None = None) -> bytes:
    """The bytes of the regular file at `path` (at most `head` bytes if given).

    Raises FileNotFoundError, NotRegular (FIFO, device, socket, directory; a symlink when
    `follow` is False), TooLarge (more than `limit` bytes), or another OSError. Never blocks
    on a FIFO, never reads a device.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise NotRegular(path, "a symlink") from None
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):  # a socket, a gone device
            raise NotRegular(path, what_is(path) or "not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(path, kind_of(st.st_mode))
        want = head if head is not None else limit + 1
        if head is None and st.st_size > limit:
            raise TooLarge(path, limit)
        chunks = []
        got = 0
        while got < want:
            chunk = os.read(fd, min(want - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
        if head is None and len(data) > limit:  # grew while being read
            raise TooLarge(path, limit)
        return data
    finally:
        os.close(fd)


def read_if_regular(path: Path | str, **kwargs) -> bytes | None:
    """`read_regular`, or None when nothing is there (any other failure raises)."""
    try:
        return read_regular(path, **kwargs)
    except FileNotFoundError:
        return None


class BadJSON(ValueError):
    """Not JSON ple4patch can use: the message says why (not JSON, too deep, a huge number)."""


def _depth_ok(text: str, max_depth: int) -> bool:
    """Whether brackets outside strings nest at most `max_depth` deep (linear, no recursion)."""
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def parse_json(data: bytes, *, max_depth: int = JSON_MAX_DEPTH) -> object:
    """JSON from bytes with bounded work; BadJSON says what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadJSON(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not _depth_ok(text, max_depth):
        raise BadJSON(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover (the depth check comes first)
        raise BadJSON(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise BadJSON(f"not valid JSON: {exc}") from None


def load_json(path: Path | str, *, limit: int = JSON_LIMIT, follow: bool = True) -> object:
    """JSON from a regular file (see `read_regular`, `parse_json`); OSError or BadJSON."""
    return parse_json(read_regular(path, limit=limit, follow=follow))

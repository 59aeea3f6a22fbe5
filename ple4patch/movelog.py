"""A log of the moves one write makes, so that a failed run takes them all back.

In the style of pip's uninstall stash (`StashedUninstallPathSet`: stash, commit,
rollback): each step that changes a path other than the target records how to undo it.
`rollback()` undoes them newest first, each on its own (a failing step must not hide the
first error); `commit()` drops what was kept for the undo. Renames and unlinks only, so a
rollback works on a full disk.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

from . import fsio
from .errors import Ple4Error


def lexists(path: Path) -> bool:
    return os.path.lexists(path)


class MoveLog:
    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self._kept: list[Path] = []

    def renamed(self, src: Path, dest: Path) -> None:
        """`src` was renamed to `dest`: the undo renames it back (unless `src` is taken again)."""

        def undo() -> None:
            if lexists(dest) and not lexists(src):
                os.rename(dest, src)
                fsio.fsync_dir(src.parent)

        self._undo.append(undo)

    def created(self, path: Path) -> None:
        """`path` did not exist and was written: the undo removes it."""
        self._undo.append(lambda: fsio.remove(path))

    def replaced(self, path: Path, kept: Path) -> None:
        """`path` was rewritten; `kept` holds its old bytes (`fsio.keep_aside`): the undo renames
        `kept` back over it, and `commit` removes `kept`."""

        def undo() -> None:
            if not lexists(kept):
                return
            if lexists(path) and os.path.samestat(os.lstat(path), os.lstat(kept)):
                fsio.remove(kept)  # never replaced (and rename() between links is a no-op)
            else:
                os.replace(kept, path)
                fsio.fsync_dir(path.parent)

        self._undo.append(undo)
        self._kept.append(kept)

    def rollback(self) -> None:
        """Undo every recorded move, newest first (best effort, each on its own)."""
        for undo in reversed(self._undo):
            with contextlib.suppress(Ple4Error, OSError):
                undo()
        self._undo.clear()

    def commit(self) -> None:
        """The write stands: remove what was kept for the undo (a leftover is a temp file that
        the next run removes)."""
        for kept in self._kept:
            with contextlib.suppress(Ple4Error):
                fsio.remove(kept)
        self._undo.clear()
        self._kept.clear()

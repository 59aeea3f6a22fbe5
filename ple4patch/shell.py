"""The commands ple4patch suggests to people, written so that they paste into a shell as printed.

Every `next:` line, `change:` hint and error that names a command to run builds it here: each
word is quoted for a POSIX shell where it needs it (`shlex.quote`), so a venv such as
`/tmp/my engine` is suggested as `ple4patch apply '/tmp/my engine'`. A placeholder
(`CHECKPOINT_DIR`, `/path/to/engine-venv`) needs no quotes and gets none. Pure functions of
strings and paths.
"""

from __future__ import annotations

import os
import shlex


def quote(word: str | os.PathLike) -> str:
    """One word (a path, an option, a placeholder) as a shell reads it back unchanged."""
    return shlex.quote(os.fsdecode(os.fspath(word)))


def ple4patch(command: str, *args: str | os.PathLike) -> str:
    """`ple4patch COMMAND ARGS...`, each argument quoted where it needs it."""
    return " ".join(["ple4patch", command, *(quote(a) for a in args)])


def venv_python(venv: str | os.PathLike) -> str:
    """The venv's own interpreter, `VENV/bin/python`, quoted where it needs it."""
    return quote(os.path.join(os.fsdecode(os.fspath(venv)), "bin", "python"))

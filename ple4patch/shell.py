"""The commands ple4patch suggests to people, written so that they paste into a shell as printed.

Every `next:` line, `change:` hint and error that names a command to run builds it here: each
word is quoted for a POSIX shell where it needs it (`shlex.quote`; a word with a control
character, bash's `$'...'`), so a venv such as
`/tmp/my engine` is suggested as `ple4patch apply '/tmp/my engine'`. A placeholder
(`CHECKPOINT_DIR`, `/path/to/engine-venv`) needs no quotes and gets none. Pure functions of
strings and paths.
"""

from __future__ import annotations

import os
import shlex


def _ansi_c(text: str) -> str:
    """`$'...'` quoting (bash, zsh, ksh): control characters as escapes, so the word stays on one
    line and survives any message that joins lines."""
    out = []
    for ch in text:
        if ch == "\\" or ch == "'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def quote(word: str | os.PathLike) -> str:
    """One word (a path, an option, a placeholder) as a shell reads it back unchanged. A word with
    a control character (a newline or a tab in a path) is written `$'...'` with escapes, never
    with the raw character: printed, it stays on one line and pastes as typed."""
    text = os.fsdecode(os.fspath(word))
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        return _ansi_c(text)
    return shlex.quote(text)


def ple4patch(command: str, *args: str | os.PathLike) -> str:
    """`ple4patch COMMAND ARGS...`, each argument quoted where it needs it."""
    return " ".join(["ple4patch", command, *(quote(a) for a in args)])


def venv_python(venv: str | os.PathLike) -> str:
    """The venv's own interpreter, `VENV/bin/python`, quoted where it needs it."""
    return quote(os.path.join(os.fsdecode(os.fspath(venv)), "bin", "python"))

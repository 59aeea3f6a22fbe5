"""Text on a terminal: is stdout one, its size, colour (honouring NO_COLOR), and the pager.

The pager is chosen as git chooses its own: `$PLE4PATCH_PAGER`, else `$PAGER`, else `less`
(an empty value or `cat` means none); `less` gets `LESS=FRX` unless `$LESS` is set, so it
quits when the text fits one screen, keeps colours and leaves the text on the screen. Text is
paged only when stdout is a terminal and the text is longer than the screen.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from typing import TextIO

from .columns import WIDTH

PAGER_ENV = "PLE4PATCH_PAGER"

_RESET = "\033[m"
_DIFF_COLOURS = (  # (line prefix, SGR), the first match wins: git's defaults
    ("+++", "\033[1m"),
    ("---", "\033[1m"),
    ("@@", "\033[36m"),
    ("+", "\033[32m"),
    ("-", "\033[31m"),
)


def is_tty(stream: TextIO | None = None) -> bool:
    stream = stream if stream is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def colour_wanted(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when `$NO_COLOR` is set to anything (no-color.org)."""
    return is_tty(stream) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def colour_diff(diff: str) -> str:
    """A unified diff with git's colours: headers bold, hunk lines cyan, + green, - red."""
    out = []
    for line in diff.splitlines(keepends=True):
        body, nl = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        sgr = next((c for prefix, c in _DIFF_COLOURS if body.startswith(prefix)), None)
        out.append(f"{sgr}{body}{_RESET}{nl}" if sgr and body else line)
    return "".join(out)


def screen_lines() -> int:
    return shutil.get_terminal_size((WIDTH, 24)).lines


def pager_command() -> list[str] | None:
    """The pager to run, as argv, or None for none."""
    for name in (PAGER_ENV, "PAGER"):
        if name in os.environ:
            value = os.environ[name].strip()
            break
    else:
        value = "less"
    if not value or value == "cat":
        return None
    return shlex.split(value)


def show(text: str, *, page: bool = True, stream: TextIO | None = None) -> None:
    """Write `text`; through the pager when `page`, stdout is a terminal and the text is
    longer than the screen. A pager that cannot be started is skipped (the text is written)."""
    stream = stream if stream is not None else sys.stdout
    argv = pager_command() if page and is_tty(stream) and text.count("\n") >= screen_lines() else None
    if argv is not None:
        env = dict(os.environ)
        env.setdefault("LESS", "FRX")
        env.setdefault("LV", "-c")
        stream.flush()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env, text=True,
                                    encoding=getattr(stream, "encoding", None) or "utf-8", errors="replace")
        except OSError:
            pass
        else:
            try:
                assert proc.stdin is not None
                proc.stdin.write(text)
                proc.stdin.close()
            except BrokenPipeError:  # the user quit the pager early
                pass
            while True:
                try:
                    proc.wait()
                    return
                except KeyboardInterrupt:  # Ctrl-C belongs to the pager (as in git)
                    continue
    stream.write(text)
    stream.flush()

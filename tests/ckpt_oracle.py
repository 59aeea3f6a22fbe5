"""Judges for the `inspect` tests: the safetensors library's own verdict, ours, and every file opened.

`library_opens` asks safetensors itself (the test extra) whether it opens a file;
`we_accept` asks ple4patch's header reader; `Opens` records, through the
interpreter's audit hook, every file this process opens (code the import system
loads excepted), so a test can assert that nothing outside was read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ple4patch.ckpt.header import HeaderError, read_safetensors_header

#: The problem codes the header reader gives a file the safetensors format does not allow.
HEADER_CODES = {"header", "truncated"}


def library_opens(path: Path) -> bool:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            list(f.keys())
    except Exception:  # noqa: BLE001 - SafetensorError and friends: the library refuses the file
        return False
    return True


def we_accept(path: Path) -> bool:
    """True when ple4patch finds nothing wrong with the file as a safetensors file."""
    try:
        sfile = read_safetensors_header(path)
    except HeaderError:
        return False
    return not [p for p in sfile.problems if p.code in HEADER_CODES]


class Opens:
    """``with Opens() as opened:`` lists the real path of every file opened inside the block."""

    active: list[str] | None = None

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if event == "open" and cls.active is not None and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if not path.endswith((".py", ".pyc", ".so")):  # the import system loading code
                cls.active.append(path)

    def __enter__(self) -> list[str]:
        Opens.active = []
        return Opens.active

    def __exit__(self, *exc) -> None:
        Opens.active = None


sys.addaudithook(Opens.hook)  # once per process: this module is imported once

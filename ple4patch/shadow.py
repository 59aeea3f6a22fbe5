"""Modules Python imports instead of a target: a package or an extension module of its name.

Python's path finder (`importlib.machinery.FileFinder`) looks in the target's directory for
`ple_layer/` first (a package: a directory with an `__init__` of any loader suffix), then for
`ple_layer` plus each loader suffix, extension modules (`EXTENSION_SUFFIXES`, such as
`.cpython-311-x86_64-linux-gnu.so`, `.abi3.so`, `.so`) before source (`.py`). Either one found
is imported, and the target file, patched or not, never runs. The suffixes are those of this
interpreter, with its cache tag (`cpython-311`) put to the venv's Python version where the
venv's site-packages (`lib/pythonX.Y/site-packages`) says another. A directory without
`__init__` is a namespace portion, which a module file beats: it shadows nothing.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from pathlib import Path

_VERSION_DIR = re.compile(r"^python(\d+)\.(\d+)t?$")


def extension_suffixes(site_packages: Path | None = None) -> list[str]:
    """The extension-module suffixes of the venv's Python: this interpreter's, its cache tag
    (`cpython-311`) changed to the venv's version when its site-packages names another."""
    suffixes = list(importlib.machinery.EXTENSION_SUFFIXES)
    ours = sys.implementation.cache_tag or ""
    m = _VERSION_DIR.match(site_packages.parent.name) if site_packages is not None else None
    if m and ours:
        theirs = f"{sys.implementation.name}-{m.group(1)}{m.group(2)}"
        if theirs != ours:
            suffixes = [s.replace(ours, theirs) for s in suffixes]
    return suffixes


def shadowing(target: Path, site_packages: Path | None = None) -> list[Path]:
    """What Python imports instead of `target` (a `.py` file): its package directory and its
    extension modules, in the order the path finder tries them (none: the target is imported)."""
    directory, stem = target.parent, target.name.removesuffix(".py")
    found: list[Path] = []
    package = directory / stem
    if os.path.isdir(package):  # as the finder sees it (a symlinked directory too); never raises
        init_names = {"__init__" + s for s in importlib.machinery.all_suffixes()}
        init_names |= {"__init__" + s for s in extension_suffixes(site_packages)}
        try:
            names = set(os.listdir(package))
        except OSError:
            names = set()
        if names & init_names:
            found.append(package)
    for suffix in extension_suffixes(site_packages):
        p = directory / (stem + suffix)
        if os.path.lexists(p):
            found.append(p)
    return found


def what(p: Path) -> str:
    """`p` in words: a package directory or an extension module."""
    return "a package of the same name" if os.path.isdir(p) else "an extension module of the same name"

"""Where every file ple4patch reads or keeps lives, and what it is named.

One home for these facts (in the style of pip-tools' ``locations.py``): the engine's
target, the backup beside it and its set-aside (stale) copies, the temp files of a write,
the target's bytecode cache, and ple4patch's own per-venv files (the lock, the local pins)
in the root of site-packages, never inside the engine's package: `pip uninstall 1cat-vllm`
then leaves no `vllm` directory behind (Python would import it as an empty namespace
package), and the files left are harmless (a leading dot: not importable, not a .pth).
Names only, and directory listings; nothing here writes.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

# The files ple4patch patches, relative to site-packages: the PLE layer (every engine version
# has it), the start-up policy file where a release has one that places the PLE table by itself,
# and the VllmConfig module where a release before the policy file places it from there (see
# `policy_file`). One engine version's set is the layer, plus whichever of the others places it.
TARGET_REL = "vllm/models/qwen4_exp/nvidia/ple_layer.py"
POLICY_REL = "vllm/platforms/runtime_defaults.py"
CONFIG_REL = "vllm/config/vllm.py"
TARGET_RELS = (TARGET_REL, POLICY_REL, CONFIG_REL)

# Beside the target.
BACKUP_SUFFIX = ".bak-pre-ple4"  # <target>.bak-pre-ple4: the pristine bytes
STALE_SUFFIX = ".stale-"  # set-aside backups: <target>.bak-pre-ple4.stale-<sha12>[-n]
TEMP_PREFIX = ".ple4patch-tmp-"  # a write in progress (beside the target or the local pins)

# In the root of site-packages.
LOCK_NAME = ".ple4patch.lock"
LOCAL_PINS_NAME = ".ple4patch-pins.json"  # written by `apply --allow-unknown` (the layer's pins)
LOCAL_PINS_NAMES = {  # each target's own local pins
    TARGET_REL: LOCAL_PINS_NAME,
    POLICY_REL: ".ple4patch-pins.runtime_defaults.json",
    CONFIG_REL: ".ple4patch-pins.config_vllm.json",
}
JOURNAL_NAME = ".ple4patch-journal.json"  # a set's apply/revert in progress: direction and files

# Shipped with ple4patch: the manifests (data keyed by pristine sha256).
SHIPPED_MANIFESTS_DIR = Path(__file__).resolve().parent / "patches"


def rel_of(target: Path) -> str:
    """Which of `TARGET_RELS` a target path is (`<site-packages>/<rel>`)."""
    posix = target.as_posix()
    for rel in TARGET_RELS:
        if posix.endswith("/" + rel):
            return rel
    raise ValueError(f"{target} is none of the files ple4patch patches ({', '.join(TARGET_RELS)})")


def site_packages_of(target: Path) -> Path:
    """The site-packages directory of a target path (`<site-packages>/<one of TARGET_RELS>`)."""
    return target.parents[len(PurePosixPath(rel_of(target)).parts) - 1]


def backup_path(target: Path) -> Path:
    return target.with_name(target.name + BACKUP_SUFFIX)


def stale_name(path: Path, tag: str, n: int = 0) -> Path:
    """`<path>.stale-<tag>` (n > 0: `<path>.stale-<tag>-<n>`): where a stale backup is set aside."""
    return path.with_name(f"{path.name}{STALE_SUFFIX}{tag}" + (f"-{n}" if n else ""))


def temp_name(path: Path, tag: str) -> Path:
    """A temp file beside `path` (`tag` makes it unique: pid and random hex)."""
    return path.parent / f"{TEMP_PREFIX}{path.name}-{tag}"


def lock_path(state_dir: Path) -> Path:
    return state_dir / LOCK_NAME


def local_pins_path(target: Path) -> Path:
    """`<site-packages>/.ple4patch-pins.json`: outside the engine's package, so `pip uninstall`
    leaves no `vllm` directory behind (and a reinstall of the same version keeps the opt-in)."""
    return site_packages_of(target) / LOCAL_PINS_NAMES[rel_of(target)]


def journal_path(site_packages: Path) -> Path:
    """`<site-packages>/.ple4patch-journal.json`: present only while a set's apply or revert runs
    (or after one was killed: the next apply/revert finishes the set, status reports it)."""
    return site_packages / JOURNAL_NAME


def pycs(target: Path) -> list[Path]:
    """The target's bytecode files (`__pycache__/<stem>.*.pyc`)."""
    return sorted((target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"))


def _listed(directory: Path, prefix: str) -> list[Path]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [directory / n for n in names if n.startswith(prefix)]


def set_aside_backups(target: Path) -> list[Path]:
    """Backups earlier runs set aside (stale ones); never restored."""
    return _listed(target.parent, target.name + BACKUP_SUFFIX + STALE_SUFFIX)


def temp_leftovers(target: Path) -> list[Path]:
    """Temp files a killed apply/revert left beside the target, or beside the local pins
    (in the root of site-packages)."""
    return [p for d in (target.parent, site_packages_of(target)) for p in _listed(d, TEMP_PREFIX)]


def _is_venv_root(d: Path) -> bool:
    """A venv's root: pyvenv.cfg in it, or bin/python beside a lib/pythonX.Y/site-packages."""
    if os.path.isfile(d / "pyvenv.cfg"):
        return True
    return os.path.exists(d / "bin" / "python") and any(
        (d / lib).is_dir() and any(e.startswith("python") for e in os.listdir(d / lib))
        for lib in ("lib", "lib64"))


def venv_root_of(path: str | os.PathLike, levels: int = 12) -> Path | None:
    """The venv that `path` lies inside (`VENV/bin/python`, `VENV/lib/python3.11/site-packages`:
    VENV; the engine's own `VENV/lib/python3.11/site-packages/vllm/.../ple_layer.py` too), looking
    up at most `levels` directories; None when `path` is a venv's root itself or in none."""
    p = Path(os.path.abspath(path))
    for parent in list(p.parents)[:levels]:
        try:
            if _is_venv_root(parent):
                return parent
        except OSError:
            continue
    return None

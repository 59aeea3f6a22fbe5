"""Find the installed 1Cat-vLLM engine in a venv, without importing it.

The engine needs CUDA to import, so everything here reads files only: the
venv's site-packages, the `1cat-vllm` dist-info (METADATA, RECORD,
direct_url.json) and the target file's path. Every refusal is an
`EngineNotFound` with a one-line message and a short machine-readable
`reason` attribute (see `REASONS`).
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from . import readfile, shell
from .errors import EngineNotFound, ModifiedFile, NotWritable, UsageError
from .paths import TARGET_REL, venv_root_of

RECORD_LIMIT = 64 * readfile.MiB  # a real RECORD (vllm: thousands of rows) is well under 1 MiB
METADATA_HEAD = 1 * readfile.MiB  # the headers come first; the description after them is not read
SMALL_LIMIT = 1 * readfile.MiB  # pyvenv.cfg, direct_url.json

DIST_NAME = "1cat-vllm"  # canonical (PEP 503) name of the fork's distribution
UPSTREAM_NAME = "vllm"  # upstream vLLM: same import package, not patchable

# Machine-readable reasons for EngineNotFound (tests and --json read them).
REASONS = (
    "no_venv",  # the venv path does not exist / is not a Python prefix
    "no_site_packages",  # no lib/pythonX.Y/site-packages in it
    "ambiguous_site_packages",  # the engine (or vllm) is in more than one site-packages
    "not_installed",  # neither 1cat-vllm nor vllm is installed
    "upstream_vllm",  # upstream vllm instead of the fork
    "both_installed",  # 1cat-vllm and vllm side by side
    "several_dist_infos",  # two 1cat-vllm dist-infos in one site-packages
    "editable",  # editable / development install
    "legacy_install",  # egg-info install without a RECORD
    "bad_record",  # RECORD missing or unreadable
    "target_missing",  # the target file is absent
)


def _refuse(reason: str, message: str) -> EngineNotFound:
    assert reason in REASONS, reason
    err = EngineNotFound(message)
    err.reason = reason  # type: ignore[attr-defined]
    return err


@dataclass(frozen=True)
class Engine:
    """What was found in the venv. `target` may not exist (see `require_target`)."""

    venv: Path
    site_packages: Path
    dist_info: Path
    version: str  # as written in METADATA
    target: Path
    record_sha256: str | None  # hex sha256 RECORD lists for the target, None if not listed
    record_size: int | None
    record_listed: bool = True  # RECORD has a row for the target (hash or not)

    @property
    def parsed_version(self) -> Version | None:
        try:
            return Version(self.version)
        except InvalidVersion:
            return None

    @property
    def target_dir(self) -> Path:
        return self.target.parent

    @property
    def state_dir(self) -> Path:
        """Where ple4patch keeps its lock and local pins: the root of site-packages."""
        return self.site_packages

    def symlinked_dir(self) -> Path | None:
        """The first directory between site-packages and the target that is a symlink (None:
        every one is a real directory, or one is absent)."""
        d = self.site_packages
        try:
            parts = self.target.relative_to(self.site_packages).parts[:-1]
        except ValueError:
            parts = Path(TARGET_REL).parts[:-1]
        for part in parts:
            d = d / part
            try:
                st = os.lstat(d)
            except OSError:
                return None  # absent: the target is missing, require_target says so
            if stat.S_ISLNK(st.st_mode):
                return d
            if not stat.S_ISDIR(st.st_mode):
                return None
        return None

    def unlink_dir_hint(self, d: Path) -> str:
        """What undoes a symlinked directory: pip writes through it (a reinstall keeps it), so
        the link goes first, then pip puts a real directory in its place."""
        try:
            to = os.readlink(d)
        except OSError:
            to = "its target"
        return (f"remove the symlink (`rm {shell.quote(d)}`: the link only, {to} keeps its files), "
                f"then reinstall the engine ({reinstall_hint(self)})")

    def inside_problem(self) -> str | None:
        """Why a write to the target would not land inside site-packages: a directory between
        site-packages and the target that is a symlink (None: every one is a real directory)."""
        d = self.symlinked_dir()
        if d is None:
            return None
        return (
            f"{d} is a symlink (to {os.readlink(d)}): ple4patch writes only inside "
            f"{self.site_packages} and does not write through symlinked directories; "
            f"{self.unlink_dir_hint(d)}"
        )

    def require_target(self) -> None:
        """Raise EngineNotFound unless the target file exists; ModifiedFile (exit 5) when a
        directory on the way to it is a symlink, or something other than a regular file is there."""
        inside = self.inside_problem()
        if inside is not None:
            raise ModifiedFile(inside)
        found = readfile.what_is(self.target)
        if found is not None and found.startswith("unreadable"):
            raise NotWritable(f"cannot read {self.target}: {found}; run as the venv's owner (or with sudo)")
        if found not in (None, "a regular file", "a symlink"):
            raise ModifiedFile(
                f"{self.target} is {found}, not a regular file: nothing written; reinstall the engine "
                f"({reinstall_hint(self)})"
            )
        if os.path.isfile(self.target):
            if not os.access(self.target, os.R_OK):
                raise NotWritable(f"cannot read {self.target}: permission denied; run as the venv's owner "
                                  f"(or with sudo)")
            size = os.stat(self.target).st_size
            if size > readfile.DEFAULT_LIMIT:
                raise ModifiedFile(
                    f"{self.target} is {size} bytes, far more than any engine source file (modified or "
                    f"foreign): nothing written; reinstall the engine ({reinstall_hint(self)})"
                )
            return
        if os.path.islink(self.target):
            raise _refuse(
                "target_missing",
                f"{self.target} is a dangling symlink: reinstall the engine ({reinstall_hint(self)})",
            )
        if not self.record_listed:
            raise _refuse(
                "target_missing",
                f"1cat-vllm {self.version} in {self.venv} has no {TARGET_REL} (its RECORD does "
                f"not list it): this engine version has no Qwen4Exp PLE layer to patch",
            )
        raise _refuse(
            "target_missing",
            f"{self.target} is listed in the RECORD of 1cat-vllm {self.version} but is gone: "
            f"reinstall the engine ({reinstall_hint(self)})",
        )

    def as_dict(self) -> dict:
        return {
            "venv": str(self.venv),
            "site_packages": str(self.site_packages),
            "dist_info": str(self.dist_info),
            "distribution": DIST_NAME,
            "version": self.version,
            "target": str(self.target),
        }


def venv_pip(venv: str | os.PathLike, args: str) -> str:
    """`VENV/bin/python -m pip ARGS`: pip run by the engine venv's own interpreter (its path
    quoted for a shell), so that it installs into that venv whichever Python runs ple4patch
    and whichever venv is active (a bare `pip` from ple4patch's own venv would install there)."""
    return f"{shell.venv_python(venv)} -m pip {args}"


def reinstall_hint(engine: Engine, *, version: bool = True) -> str:
    """The pip command that puts the engine's shipped files back, in the engine's own venv
    (`venv_pip`); `version=False` when the installed version is not known for sure."""
    req = f"1cat-vllm=={engine.version}" if version and engine.version else "1cat-vllm"
    quoted = f"'{req}'" if "'" not in req else shell.quote(req)
    return venv_pip(engine.venv, f"install --force-reinstall --no-deps {quoted}")


def default_venv() -> Path:
    """`$VIRTUAL_ENV` if set, else the running interpreter's prefix."""
    env = os.environ.get("VIRTUAL_ENV")
    return Path(env) if env else Path(sys.prefix)


# Where the venv came from (`find_engine`), and what to do when it holds no engine.
_GIVEN, _ACTIVE, _OWN = "given", "active", "own"
_OR_ACTIVATE = ("or activate it (`. /path/to/engine-venv/bin/activate` sets $VIRTUAL_ENV, which "
                "ple4patch reads when no VENV is given)")


def _pass_it(command: str) -> str:
    return (f"pass the engine's venv, the directory holding the bin/python that `vllm serve` runs from "
            f"(`ple4patch {command} /path/to/engine-venv`)")


def _venv_source(venv: str | os.PathLike | None) -> str:
    if venv is not None:
        return _GIVEN
    return _ACTIVE if os.environ.get("VIRTUAL_ENV") else _OWN


def _which_venv(source: str) -> str:
    """How the venv was chosen, for a message: nothing when it was given."""
    return {
        _GIVEN: "",
        _ACTIVE: "the active venv, $VIRTUAL_ENV; ",
        _OWN: "no VENV given and no venv active, so the venv of the Python running ple4patch; ",
    }[source]


def _what_to_pass(source: str, command: str) -> str:
    """What to do when the venv holds no engine: pass the right one (or activate it)."""
    if source == _GIVEN:
        return _pass_it(command)
    return f"{_pass_it(command)}, {_OR_ACTIVATE}"


def record_hash_to_hex(value: str) -> str | None:
    """`sha256=<urlsafe-b64, no padding>` (RECORD format) -> hex digest, or None."""
    algo, _, b64 = value.partition("=")
    if algo != "sha256" or not b64:
        return None
    try:
        digest = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
    except (binascii.Error, ValueError):
        return None
    return digest.hex() if len(digest) == 32 else None


def find_engine(venv: str | os.PathLike | None = None, *, command: str = "status") -> Engine:
    """Locate 1cat-vllm and its target in `venv` (default: `default_venv()`); `command` is the
    one a refusal's example names (`ple4patch COMMAND /path/to/engine-venv`)."""
    if venv is not None and os.fspath(venv) in ("", b""):
        raise UsageError("VENV is empty: pass the engine's venv (the directory holding bin/python)")
    source = _venv_source(venv)
    venv_path = Path(venv) if venv is not None else default_venv()
    venv_path = Path(os.path.abspath(venv_path))
    root = venv_root_of(venv_path)
    meant = (f": did you mean {root}? (pass the venv's root: `{shell.ple4patch(command, root)}`)"
             if root is not None else "")
    if not os.path.isdir(venv_path):
        how = " ($VIRTUAL_ENV)" if source == _ACTIVE else ""
        if root is not None:
            what = "is a file in the venv" if os.path.lexists(venv_path) else "does not exist; it would lie in the venv"
            raise _refuse("no_venv", f"{venv_path}{how} {what} {root}, not a venv{meant}")
        raise _refuse("no_venv", f"no such venv: {venv_path}{how} is not a directory; {_pass_it(command)}")
    candidates = _site_packages_dirs(venv_path)
    if not candidates:
        raise _refuse(
            "no_site_packages",
            f"{venv_path} is not a Python venv" + (
                f" but a directory in one{meant}" if root is not None else
                ": no lib/pythonX.Y/site-packages in it (pass the venv's root directory, the one holding bin/python)"),
        )
    site = _choose_site_packages(venv_path, candidates)
    return _find_in_site(venv_path, site, source, command)


def find_target(venv: str | os.PathLike | None = None, *, command: str = "status") -> Engine:
    """`find_engine`, for a command that needs the target file: EngineNotFound unless it exists."""
    engine = find_engine(venv, command=command)
    engine.require_target()
    return engine


def _site_packages_dirs(venv: Path) -> list[Path]:
    found: dict[str, Path] = {}
    for lib in ("lib", "lib64"):
        base = venv / lib
        if not os.path.isdir(base):
            continue
        for sub in sorted(base.glob("python3*/site-packages")):
            if os.path.isdir(sub):
                found.setdefault(os.path.realpath(sub), sub)
    return list(found.values())


def _engine_like(site: Path) -> bool:
    for entry in _listdir(site):
        name = _dist_name_of(entry)
        if name in (DIST_NAME, UPSTREAM_NAME) or _editable_marker_name(entry) == DIST_NAME:
            return True
    return False


def _choose_site_packages(venv: Path, candidates: list[Path]) -> Path:
    # The one the venv's own Python imports (pyvenv.cfg says which Python), whatever else exists.
    version = _pyvenv_python(venv)
    own = [c for c in candidates if version and c.parent.name == f"python{version}"]
    if own:
        return own[0]
    if len(candidates) == 1:
        return candidates[0]
    with_engine = [c for c in candidates if _engine_like(c)]
    if len(with_engine) == 1:
        return with_engine[0]
    if len(with_engine) > 1:
        listing = ", ".join(str(c) for c in with_engine)
        raise _refuse(
            "ambiguous_site_packages",
            f"ambiguous site-packages in {venv}: vllm/1cat-vllm is installed in several ({listing}); "
            f"remove the stale one or pass a venv with one Python",
        )
    # No engine anywhere: report against the venv's own Python if pyvenv.cfg says which.
    version = _pyvenv_python(venv)
    for c in candidates:
        if version and c.parent.name == f"python{version}":
            return c
    return candidates[0]


def _pyvenv_python(venv: Path) -> str | None:
    try:
        text = readfile.read_regular(venv / "pyvenv.cfg", limit=SMALL_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None
    m = re.search(r"^\s*(?:version|version_info)\s*=\s*(\d+)\.(\d+)", text, re.MULTILINE)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _split_dist_info(entry: str) -> tuple[str, str] | None:
    """(name, version) of a `<name>-<version>.dist-info` entry, else None.

    As the interpreter's importlib.metadata reads it: the suffix in any case, the name up to
    the first `-` (pip escapes a `-` in the name as `_`), compared canonicalised, so
    `1cat_vllm`, `1Cat_vLLM`, `1cat.vllm` and `1CAT__VLLM` are all 1cat-vllm, and an unescaped
    `1cat-vllm-1.5.0.dist-info` is not (the interpreter does not find it either).
    """
    if not entry.lower().endswith(".dist-info"):
        return None
    name, sep, version = entry[: -len(".dist-info")].partition("-")
    return (name, version) if sep else None


def _dist_name_of(entry: str) -> str | None:
    """Canonical project name of a `<name>-<ver>.dist-info` entry (None otherwise)."""
    split = _split_dist_info(entry)
    return canonicalize_name(split[0]) if split and split[0] else None


def _egg_info_name(entry: str) -> str | None:
    if not entry.endswith(".egg-info"):
        return None
    return canonicalize_name(entry[: -len(".egg-info")].partition("-")[0])


_EDITABLE_PREFIXES = ("__editable__.", "__editable___")


def _editable_marker_name(entry: str) -> str | None:
    """Canonical project name of an editable-install artefact in site-packages, else None.

    Covers PEP 660 editables (`__editable__.<name>-<ver>.pth`,
    `__editable___<name>_<ver>_finder.py`) and legacy `<name>.egg-link`.
    """
    if entry.endswith(".egg-link"):
        return canonicalize_name(entry[: -len(".egg-link")])
    if entry.startswith("__editable__.") and entry.endswith(".pth"):
        return canonicalize_name(entry[len("__editable__.") : -len(".pth")].partition("-")[0])
    if entry.startswith("__editable___") and entry.endswith("_finder.py"):
        core = entry[len("__editable___") : -len("_finder.py")]
        # <name>_<version with _>: the name is the part before the first `_<digit>`
        m = re.match(r"(.+?)_\d", core)
        return canonicalize_name(m.group(1) if m else core)
    return None


def _find_in_site(venv: Path, site: Path, source: str = _GIVEN, command: str = "status") -> Engine:
    try:
        entries = sorted(os.listdir(site))
    except OSError as exc:  # not "not installed": this user cannot look
        raise NotWritable(f"cannot read {site}: {exc.strerror or exc}; run as the venv's owner (or with sudo)") from None
    ours = [e for e in entries if _dist_name_of(e) == DIST_NAME]
    upstream = [e for e in entries if _dist_name_of(e) == UPSTREAM_NAME]
    editable_markers = [e for e in entries if _editable_marker_name(e) == DIST_NAME]
    eggs = [e for e in entries if _egg_info_name(e) == DIST_NAME]

    if ours and upstream:
        raise _refuse(
            "both_installed",
            f"both 1cat-vllm ({ours[0]}) and upstream vllm ({upstream[0]}) are installed in {site}: "
            f"they share the `vllm` package; uninstall both and reinstall 1cat-vllm",
        )
    if not ours:
        if upstream:
            raise _refuse(
                "upstream_vllm",
                f"{site} has upstream vllm ({upstream[0]}), not the 1Cat-vLLM fork: ple4patch patches "
                f"only 1cat-vllm: install it in a venv of its own (python3 -m venv DIR, then "
                f"DIR/bin/python -m pip install 1cat-vllm) and pass that venv",
            )
        if editable_markers:
            raise _refuse(
                "editable",
                f"1cat-vllm is an editable install in {site} ({editable_markers[0]}): patch the "
                f"source checkout yourself or install a wheel",
            )
        if eggs:
            raise _refuse(
                "legacy_install",
                f"1cat-vllm in {site} is a legacy egg-info install without a RECORD ({eggs[0]}): "
                f"reinstall it with pip from a wheel",
            )
        raise _refuse(
            "not_installed",
            f"no engine: 1cat-vllm is not installed in {venv} ({_which_venv(source)}looked in {site}); "
            f"{_what_to_pass(source, command)}" + _leftover_package(site),
        )
    if len(ours) > 1:
        raise _refuse("several_dist_infos", _several_dist_infos(venv, site, ours))

    dist_info = site / ours[0]
    if os.path.islink(dist_info):  # pip never makes one: its RECORD would be read from elsewhere
        raise _refuse("bad_record", f"{dist_info} is a symlink (to {os.readlink(dist_info)}): a broken install; "
                                    f"reinstall the engine with pip")
    version = _metadata_version(dist_info) or (_split_dist_info(ours[0]) or ("", ""))[1]
    if _is_editable(dist_info):
        raise _refuse(
            "editable",
            f"1cat-vllm {version} in {site} is an editable install (direct_url.json says "
            f"editable): patch the source checkout yourself or install a wheel",
        )
    record = _read_record(dist_info)
    row = record.get(TARGET_REL)
    if row is None and editable_markers:
        raise _refuse(
            "editable",
            f"1cat-vllm {version} in {site} is an editable install ({editable_markers[0]}, the "
            f"RECORD lists no {TARGET_REL}): patch the source checkout yourself or install a wheel",
        )
    record_sha, record_size = row if row else (None, None)
    return Engine(
        venv=venv,
        site_packages=site,
        dist_info=dist_info,
        version=version,
        target=site / TARGET_REL,
        record_sha256=record_sha,
        record_size=record_size,
        record_listed=row is not None,
    )


RECORD_ROWS_COMPARED = 5000  # enough to tell versions apart; bounded stat()s on the error path


def _record_fit(site: Path, name: str) -> tuple[int, float]:
    """How well a dist-info's RECORD fits the installed files: (1 if it lists its own files
    (a copied or renamed dist-info does not), the share of its other rows whose file is there
    with the size it lists); (-1, 0) when it cannot be read."""
    try:
        rows = _read_record(site / name)
    except EngineNotFound:
        return -1, 0.0
    own = any(rel.startswith(name + "/") for rel in rows)
    sized = [(rel, size) for rel, (_sha, size) in rows.items()
             if size is not None and ".dist-info/" not in rel][:RECORD_ROWS_COMPARED]
    fits = 0
    for rel, size in sized:
        try:
            fits += os.lstat(site / rel).st_size == size
        except OSError:
            pass
    return int(own), fits / len(sized) if sized else 0.0


def _several_dist_infos(venv: Path, site: Path, ours: list[str]) -> str:
    """The refusal of several 1cat-vllm dist-infos, with a fix that works: pip sees one of them
    (a `--force-reinstall` or an uninstall leaves the others, and an uninstall of one whose files
    are gone leaves it too), so the stale ones must go by hand; the installed one is the one
    whose RECORD fits the files."""
    fit = {name: _record_fit(site, name) for name in ours}
    ranked = sorted(ours, key=lambda n: fit[n], reverse=True)
    head = (f"several 1cat-vllm dist-infos in {site} ({', '.join(ours)}): a broken install, which pip "
            f"does not repair (it sees one of them, and a reinstall or an uninstall leaves the others)")
    if fit[ranked[0]] == fit[ranked[1]]:  # their RECORDs fit the files alike: the user must choose
        each = ", ".join(f"`rm -r {shell.quote(site / n)}`" for n in ours)
        return (f"{head}; which one is installed cannot be told from their RECORDs: keep the dist-info "
                f"of the version you mean to have, remove the others (one of {each} each), then reinstall "
                f"that version ({venv_pip(venv, 'install --force-reinstall --no-deps 1cat-vllm==VERSION')})")
    keep, stale = ranked[0], ranked[1:]
    version = _metadata_version(site / keep) or (_split_dist_info(keep) or ("", ""))[1]
    req = shell.quote(f"1cat-vllm=={version}") if version else "1cat-vllm"
    rm = " ".join(shell.quote(site / n) for n in stale)
    return (f"{head}; {', '.join(stale)} {'is' if len(stale) == 1 else 'are'} stale (the RECORD does not "
            f"match the installed files; {keep} does): remove {'it' if len(stale) == 1 else 'them'} "
            f"(`rm -r {rm}`), then reinstall the engine ({venv_pip(venv, f'install --force-reinstall --no-deps {req}')})")


def _leftover_package(site: Path) -> str:
    """A note on a `vllm` directory left without an engine (e.g. ple4patch's backup after
    `pip uninstall` of a patched engine: pip removes only the files it installed)."""
    pkg = site / "vllm"
    if os.path.islink(pkg) or not os.path.isdir(pkg):
        return ""
    names: list[str] = []
    for root, dirs, files in os.walk(pkg):
        dirs.sort()
        names += [os.path.relpath(os.path.join(root, f), site) for f in sorted(files)]
        if len(names) > 3:
            break
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "") if names else "only empty folders"
    return (
        f"; note: {pkg} is left over without an engine ({shown}) and Python imports it as an "
        f"empty `vllm` namespace package: reinstall 1cat-vllm, or delete that folder"
    )


def _metadata_version(dist_info: Path) -> str | None:
    try:
        head = readfile.read_regular(dist_info / "METADATA", head=METADATA_HEAD, follow=False)
    except OSError:  # absent, not a regular file, unreadable: the dist-info's name says the version
        return None
    for line in head.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            break  # end of the headers
        key, _, value = line.partition(":")
        if key.strip().lower() == "version":
            value = value.strip()
            return value if value and len(value) <= 200 and value.isprintable() else None
    return None


def _is_editable(dist_info: Path) -> bool:
    try:
        data = readfile.load_json(dist_info / "direct_url.json", limit=SMALL_LIMIT, follow=False)
    except (OSError, ValueError):
        return False
    dir_info = data.get("dir_info") if isinstance(data, dict) else None
    return bool(isinstance(dir_info, dict) and dir_info.get("editable"))


def _read_record(dist_info: Path) -> dict[str, tuple[str | None, int | None]]:
    """RECORD as {normalised relative path: (hex sha256 or None, size or None)}."""
    record = dist_info / "RECORD"

    def bad(why: str) -> EngineNotFound:
        return _refuse("bad_record", f"cannot read {record} ({why}): a broken install; reinstall the "
                                     f"engine with pip")

    try:
        data = readfile.read_regular(record, limit=RECORD_LIMIT, follow=False)
    except (readfile.NotRegular, readfile.TooLarge) as exc:
        raise bad(str(exc).replace(f"{record} is ", "it is ", 1)) from None
    except OSError as exc:
        raise bad(exc.strerror or str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    rows: dict[str, tuple[str | None, int | None]] = {}
    try:
        for fields in csv.reader(io.StringIO(text)):
            if not fields:
                continue
            path = os.path.normpath(fields[0].replace("\\", "/")).replace(os.sep, "/")
            digest = record_hash_to_hex(fields[1]) if len(fields) > 1 and fields[1] else None
            size: int | None = None
            if len(fields) > 2 and fields[2].strip().isascii() and fields[2].strip().isdigit() and len(fields[2].strip()) <= 18:
                size = int(fields[2])
            rows[path] = (digest, size)
    except csv.Error as exc:  # a field over csv's size limit, a NUL byte...
        raise bad(f"not a RECORD: {exc}") from None
    return rows

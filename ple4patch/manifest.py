"""The sha256 pins of known target files: data in `ple4patch/patches/*.json`.

A manifest file looks like::

    {
      "schema_version": 1,
      "target": "vllm/models/qwen4_exp/nvidia/ple_layer.py",
      "pins": {
        "<sha256 of a pristine target>": {
          "label": "which release or commit",
          "engine_versions": ">=1.5.0,<1.5.1",   # PEP 440 range it plausibly belongs to
          "size": 83568,                          # bytes of the pristine file
          "patch_id": "nvfp4-rowpacked-1",        # the patch that produced...
          "patched_sha256": "<sha256 of the exact patched output>",
          "older": {"<older patch id>": "<sha256 of its output>"},  # optional history
          "note": "what the file is (era, features)"                # optional
        }
      }
    }

One file per target: `"target"` is one of `paths.TARGET_RELS` (the PLE layer, or the engine's
start-up policy file `vllm/platforms/runtime_defaults.py`); a `Manifest` holds the pins of every
target (each `Pin` knows its target; `only(target)` picks one file's). A pin is recognised by its hash, whatever the installed version string says
(the range is only reported). Three sources are merged: the shipped files in
`patches/`, extra files named in `$PLE4PATCH_EXTRA_MANIFESTS` (os.pathsep-separated;
tests and the demo use it) or passed by the caller, and the venv's local pins
(`<site-packages>/.ple4patch-pins.json`, written by `apply --allow-unknown`).

No libcst, no torch: `status` loads this.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from . import pins_shape, readfile
from .errors import Ple4Error, UsageError
from .paths import SHIPPED_MANIFESTS_DIR, TARGET_REL, TARGET_RELS, local_pins_path, rel_of

SCHEMA_VERSION = 1
EXTRA_ENV = "PLE4PATCH_EXTRA_MANIFESTS"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Pin:
    pristine_sha256: str
    patched_sha256: str
    patch_id: str
    label: str
    engine_versions: str = ""
    size: int | None = None
    older: Mapping[str, str] = field(default_factory=dict)  # patch id -> patched sha256
    source: str = ""  # the file it was read from, or "local"
    from_extra: bool = False  # read from a file named in $PLE4PATCH_EXTRA_MANIFESTS or by the caller
    note: str = ""  # free text: what the file is
    target: str = TARGET_REL  # which file of the set (the manifest file's "target")

    @property
    def is_local(self) -> bool:
        return self.source == "local"

    @property
    def shown_label(self) -> str:
        """The label for text output: control characters (a newline, a carriage return, any
        other C0 or C1 code, DEL) escaped, so a label never makes a line of its own."""
        return escape_controls(self.label)

    def version_matches(self, version: str) -> bool | None:
        """Whether `version` is in the pin's range (None when either cannot be parsed)."""
        if not self.engine_versions:
            return None
        try:
            return SpecifierSet(self.engine_versions).contains(Version(version), prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return None

    def to_json(self) -> dict:
        out: dict = {
            "label": self.label,
            "engine_versions": self.engine_versions,
            "size": self.size,
            "patch_id": self.patch_id,
            "patched_sha256": self.patched_sha256,
        }
        if self.older:
            out["older"] = dict(sorted(self.older.items()))
        if self.note:
            out["note"] = self.note
        return out

    def describe(self) -> dict:
        return {"pristine_sha256": self.pristine_sha256, "source": self.source, "target": self.target,
                **self.to_json()}


class ManifestError(Ple4Error):
    """A manifest file is unreadable or inconsistent (exit code: usage for extra files)."""


@dataclass
class Manifest:
    pins: dict[str, Pin] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    # -- lookups -------------------------------------------------------------
    def by_pristine(self, sha: str) -> Pin | None:
        return self.pins.get(sha)

    def by_patched(self, sha: str) -> Pin | None:
        """The pin whose current patched output has this hash."""
        for pin in self.pins.values():
            if pin.patched_sha256 == sha:
                return pin
        return None

    def by_older_patched(self, sha: str) -> tuple[Pin, str] | None:
        """(pin, older patch id) whose output by an older patch id has this hash."""
        for pin in self.pins.values():
            for patch_id, patched in pin.older.items():
                if patched == sha:
                    return pin, patch_id
        return None

    def known_pristine(self, sha: str) -> bool:
        return sha in self.pins

    def patch_ids(self) -> set[str]:
        """Every patch id a pin names (its own, and those of its `older` history)."""
        return {pin.patch_id for pin in self.pins.values()} | {i for pin in self.pins.values() for i in pin.older}

    # -- building ------------------------------------------------------------
    def add(self, pin: Pin) -> None:
        have = self.pins.get(pin.pristine_sha256)
        if have is not None and (have.patched_sha256, have.patch_id) != (
            pin.patched_sha256,
            pin.patch_id,
        ):
            if pin.is_local and not have.is_local:
                return  # a shipped pin wins over a local one
            if have.is_local and not pin.is_local:
                self.pins[pin.pristine_sha256] = pin
                return
            raise ManifestError(
                f"conflicting pins for pristine sha256 {pin.pristine_sha256[:12]}…: "
                f"{have.source} says {have.patch_id}/{have.patched_sha256[:12]}…, {pin.source} says "
                f"{pin.patch_id}/{pin.patched_sha256[:12]}…; fix or drop one of the manifest files"
            )
        if have is None or (have.is_local and not pin.is_local):
            self.pins[pin.pristine_sha256] = pin

    def merged(self, other: "Manifest") -> "Manifest":
        out = Manifest(dict(self.pins), list(self.sources))
        for pin in other.pins.values():
            out.add(pin)
        out.sources += [s for s in other.sources if s not in out.sources]
        return out

    def only(self, target: str) -> "Manifest":
        """The pins of one file of the set."""
        return Manifest({s: p for s, p in self.pins.items() if p.target == target}, list(self.sources))

    def targets(self) -> set[str]:
        return {p.target for p in self.pins.values()}

    def to_json(self, target: str | None = None) -> dict:
        """One manifest file's data: the pins of `target` (default: the one target of the pins)."""
        if target is None:
            targets = self.targets()
            if len(targets) > 1:
                raise ValueError(f"the pins are for several files ({', '.join(sorted(targets))}): name one")
            target = targets.pop() if targets else TARGET_REL
        pins = self.only(target).pins
        return {
            "schema_version": SCHEMA_VERSION,
            "target": target,
            "pins": {sha: pins[sha].to_json() for sha in sorted(pins)},
        }

    def dumps(self, target: str | None = None) -> str:
        return json.dumps(self.to_json(target), indent=2, sort_keys=False) + "\n"


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """`text` with its control characters written as escapes (`\\n`, `\\x1b`...)."""
    return "".join(
        _ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 else ch)
        for ch in text
    )


def _check_hex(value: object, what: str, path: str) -> str:
    if not isinstance(value, str) or not _HEX64.match(value):
        raise ManifestError(f"{path}: {what} must be a lowercase hex sha256, got {value!r}")
    return value


def parse(data: object, source: str) -> Manifest:
    """Validate manifest JSON data; `source` names it in errors and pins."""
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ManifestError(f"{source}: not a ple4patch manifest (schema_version {SCHEMA_VERSION})")
    target = data.get("target", TARGET_REL)
    if target not in TARGET_RELS:
        raise ManifestError(
            f"{source}: pins another target ({target!r}; ple4patch patches {', '.join(TARGET_RELS)})"
        )
    pins = data.get("pins")
    if not isinstance(pins, dict):
        raise ManifestError(f"{source}: 'pins' must be an object keyed by pristine sha256")
    out = Manifest(sources=[source])
    for sha, entry in pins.items():
        _check_hex(sha, "a pin key", source)
        if not isinstance(entry, dict):
            raise ManifestError(f"{source}: pin {sha[:12]}… must be an object")
        patch_id = entry.get("patch_id")
        label = entry.get("label")
        if not isinstance(patch_id, str) or not patch_id or not isinstance(label, str):
            raise ManifestError(f"{source}: pin {sha[:12]}… needs a 'label' and a 'patch_id'")
        versions = entry.get("engine_versions") or ""
        try:
            SpecifierSet(versions)
        except InvalidSpecifier:
            raise ManifestError(
                f"{source}: pin {sha[:12]}… has a bad engine_versions range {versions!r}"
            ) from None
        older = entry.get("older") or {}
        if not isinstance(older, dict):
            raise ManifestError(f"{source}: pin {sha[:12]}… 'older' must be an object")
        size = entry.get("size")
        note = entry.get("note") or ""
        if not isinstance(note, str):
            raise ManifestError(f"{source}: pin {sha[:12]}… 'note' must be text")
        out.add(
            Pin(
                pristine_sha256=sha,
                patched_sha256=_check_hex(entry.get("patched_sha256"), "patched_sha256", source),
                patch_id=patch_id,
                label=label,
                engine_versions=versions,
                size=size if isinstance(size, int) else None,
                older={k: _check_hex(v, "an older patched sha256", source) for k, v in older.items()},
                source=source,
                note=note,
                target=target,
            )
        )
    return out


def load_file(path: str | os.PathLike, *, source: str | None = None, follow: bool = True) -> Manifest:
    """A manifest file, read without blocking and with bounded work (`readfile.load_json`), its
    shape checked (`pins_shape`) before it is parsed; any problem is a ManifestError."""
    path = Path(path)
    try:
        data = readfile.load_json(path, follow=follow)
    except (readfile.NotRegular, readfile.TooLarge) as exc:
        raise ManifestError(f"cannot read manifest {exc}") from None
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    except readfile.BadJSON as exc:
        raise ManifestError(f"manifest {path} is not valid JSON: {exc}") from None
    bad = pins_shape.problem(data)
    if bad is not None:
        raise ManifestError(f"manifest {path} is not a ple4patch manifest: {bad}")
    return parse(data, source or str(path))


def shipped_files() -> list[Path]:
    return sorted(SHIPPED_MANIFESTS_DIR.glob("*.json"))


def extra_files_from_env(environ: Mapping[str, str] | None = None) -> list[Path]:
    value = (environ if environ is not None else os.environ).get(EXTRA_ENV, "")
    return [Path(p) for p in value.split(os.pathsep) if p.strip()]


def load(
    extra: Iterable[str | os.PathLike] = (),
    *,
    shipped: bool = True,
    use_env: bool = True,
) -> Manifest:
    """The shipped manifest, plus `extra` files, plus those in $PLE4PATCH_EXTRA_MANIFESTS."""
    out = Manifest()
    shipped_paths = shipped_files() if shipped else []
    for p in shipped_paths:
        out = out.merged(load_file(p, source=f"ple4patch/patches/{p.name}"))
    seen = {os.path.realpath(p) for p in shipped_paths}  # realpath: never raises (a symlink loop)
    extras = [Path(p) for p in extra] + (extra_files_from_env() if use_env else [])
    for p in extras:
        if os.path.realpath(p) in seen:
            continue
        seen.add(os.path.realpath(p))
        try:
            extra_pins = load_file(p)
            extra_pins.pins = {sha: replace(pin, from_extra=True) for sha, pin in extra_pins.pins.items()}
            out = out.merged(extra_pins)
        except ManifestError as exc:  # a file the user named: a usage problem
            raise UsageError(f"{exc} (named in ${EXTRA_ENV} or passed by the caller)") from None
    return out


# -- local pins (in the venv: the root of its site-packages) ------------------


def _load_local_file(path: Path) -> Manifest | None:
    """The local pins, or None when absent or unusable (not a regular file, a symlink, bad JSON,
    wrong types): an unusable pins file counts as none (`local_pins_problem` says why)."""
    try:
        return load_file(path, source="local", follow=False)
    except ManifestError:
        return None


def local_pins_problem(target: Path) -> str | None:
    """Why the venv's local pins file is unusable (None: absent or usable)."""
    path = local_pins_path(target)
    if readfile.what_is(path) is None:
        return None
    try:
        load_file(path, source="local", follow=False)
    except ManifestError as exc:
        return str(exc)
    return None


def load_local(target: Path) -> Manifest:
    """The venv's local pins; an unreadable file counts as none."""
    m = _load_local_file(local_pins_path(target))
    return Manifest(dict(m.only(rel_of(target)).pins), ["local"]) if m is not None else Manifest()


def with_local(manifest: Manifest, target: Path) -> Manifest:
    return manifest.merged(load_local(target))


def for_target(manifest: Manifest | None, target: Path) -> Manifest:
    """`manifest` (None: the shipped and extra pins, `load()`) plus the venv's local pins."""
    return with_local(manifest if manifest is not None else load(), target)


def local_pin(
    *, pristine: str, patched: str, patch_id: str, version: str, size: int, target: str = TARGET_REL
) -> Pin:
    return Pin(
        pristine_sha256=pristine,
        patched_sha256=patched,
        patch_id=patch_id,
        label=f"local pin: 1cat-vllm {version} as shipped (matched its RECORD), "
        f"applied with --allow-unknown",
        engine_versions=f"=={version}" if _valid_version(version) else "",
        size=size,
        source="local",
        target=target,
    )


def add_local_pin(current: Manifest, pin: Pin) -> Manifest:
    """The local manifest with `pin` added (an older pin for the same file keeps its history)."""
    out = Manifest(dict(current.pins), ["local"])
    have = out.pins.get(pin.pristine_sha256)
    if have is not None and have.patch_id != pin.patch_id:
        older = dict(have.older)
        older[have.patch_id] = have.patched_sha256
        pin = replace(pin, older=older)
    out.pins[pin.pristine_sha256] = pin
    return out


def _valid_version(version: str) -> bool:
    try:
        Version(version)
    except InvalidVersion:
        return False
    return True

"""Assess the target: what it is (from three hashes and its sentinel) and what its backup is.

The three hashes: what the engine's RECORD says was shipped, the manifest's
pristine pins and its patched pins (the venv's local pins count as manifest).
No libcst, no torch: `status` runs this.

=============== ==========================================================
state           meaning
=============== ==========================================================
pristine        a pinned pristine file (shipped manifest or local pin)
patched         the exact output of the current patch id for a pinned file
patched_older   the exact output of an older patch id for a pinned file
unpinned        as shipped (matches RECORD) but not pinned: review + opt in
modified        matches neither RECORD nor any pin: foreign or hand-edited (a file
                whose sentinel names a patch id but whose bytes are no known output of
                it, too: edited after patching, or patched by another ple4patch build)
missing         the target file is absent
not_installed   no usable engine in the venv (engine.find_engine refused)
=============== ==========================================================

Backup (`<target>.bak-pre-ple4`): absent; present (the pristine bytes the
current file derives from, or the current file itself); stale (a known pristine
file of another version or build); corrupt (not a regular file, unreadable, or
bytes that match nothing known).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import readfile, shadow, shell
from .engine import Engine, _read_record, reinstall_hint
from .errors import EngineNotFound
from .fsio import identity_of, read_if_exists
from .hashing import sha256_hex
from .manifest import Manifest, Pin, local_pins_problem
from .paths import backup_path, local_pins_path, set_aside_backups, temp_leftovers
from .sentinel import PATCH_ID, find_patch_id


class State(str, enum.Enum):
    PRISTINE = "pristine"
    PATCHED = "patched"
    PATCHED_OLDER = "patched_older"
    UNPINNED = "unpinned"
    MODIFIED = "modified"
    MISSING = "missing"
    NOT_INSTALLED = "not_installed"


class BackupState(str, enum.Enum):
    ABSENT = "absent"
    PRESENT = "present"
    STALE = "stale"
    CORRUPT = "corrupt"


@dataclass(frozen=True)
class Classified:
    state: State
    pin: Pin | None  # the pin the bytes were recognised by
    patch_id: str | None  # the patch id the file carries (None: unpatched)
    pristine_sha256: str | None  # the pristine bytes this file derives from, when known


def classify(
    current_sha: str | None,
    current_patch_id: str | None,
    record_sha: str | None,
    manifest: Manifest,
) -> Classified:
    """The state of a target from its hash, its sentinel, RECORD and the pins."""
    if current_sha is None:
        return Classified(State.MISSING, None, None, record_sha)
    pin = manifest.by_patched(current_sha)
    if pin is not None:
        state = State.PATCHED if pin.patch_id == PATCH_ID else State.PATCHED_OLDER
        return Classified(state, pin, pin.patch_id, pin.pristine_sha256)
    older = manifest.by_older_patched(current_sha)
    if older is not None:
        pin, patch_id = older
        return Classified(State.PATCHED_OLDER, pin, patch_id, pin.pristine_sha256)
    pin = manifest.by_pristine(current_sha)
    if pin is not None:
        return Classified(State.PRISTINE, pin, None, current_sha)
    # A sentinel alone proves nothing: without a known output hash the file may have been
    # edited after patching, or patched by another (a newer) ple4patch: never written over.
    if current_patch_id is None and record_sha is not None and current_sha == record_sha:
        return Classified(State.UNPINNED, None, None, current_sha)
    return Classified(State.MODIFIED, None, current_patch_id, record_sha)


def classify_backup(
    backup_sha: str | None,
    *,
    exists: bool,
    regular: bool,
    expected_pristine: str | None,
    record_sha: str | None,
    manifest: Manifest,
) -> BackupState:
    if not exists:
        return BackupState.ABSENT
    if not regular or backup_sha is None:
        return BackupState.CORRUPT
    if expected_pristine is not None and backup_sha == expected_pristine:
        return BackupState.PRESENT
    if manifest.known_pristine(backup_sha) or (record_sha is not None and backup_sha == record_sha):
        return BackupState.STALE
    return BackupState.CORRUPT


@dataclass
class Assessment:
    engine: Engine
    state: State
    pin: Pin | None
    patch_id: str | None
    pristine_sha256: str | None
    current_sha256: str | None
    current_bytes: bytes | None
    backup: BackupState
    backup_sha256: str | None
    notes: list[str] = field(default_factory=list)
    current_identity: tuple | None = None  # `fsio.identity_of` the target, taken before it was read
    known_patch_ids: frozenset = frozenset()  # the patch ids this build's pins know (PATCH_ID too)
    shadowed_by: tuple = ()  # what Python imports instead of the target (`shadow.shadowing`)
    symlink_fix: str | None = None  # the step before any other: the target, or a directory on its way, is a symlink
    pins_problem: str | None = None  # why its local pins file is unusable (`manifest.local_pins_problem`)

    def modified_why(self) -> str:
        """Why a `modified` file is modified, in words (its state line and the refusals)."""
        pid = self.patch_id
        if pid is None:
            return "matches neither the engine's RECORD nor a pinned file (modified or foreign)"
        if self.lost_pin():
            return (f"carries the ple4patch sentinel ({pid}) but no usable pin knows its bytes: its local pins "
                    f"file {local_pins_path(self.target)} is unusable ({self.pins_problem})")
        if pid == PATCH_ID:
            return (f"carries the ple4patch sentinel ({pid}) but is not a known patched output "
                    f"(edited after patching, or its pins are gone)")
        if pid in self.known_patch_ids:
            return (f"carries the sentinel of the older patch id {pid} but is not its known output "
                    f"(edited after patching)")
        return f"was patched by another ple4patch build: patch id {pid}, which this one ({PATCH_ID}) does not know"

    def lost_pin(self) -> bool:
        """A file this ple4patch patched (it carries a sentinel of a patch id it knows) that no pin
        knows while its local pins file cannot be read: its pin (an --allow-unknown apply's) may
        be in that file."""
        return (self.state is State.MODIFIED and self.patch_id in self.known_patch_ids
                and self.pins_problem is not None)

    def pins_fix(self) -> str:
        """For `lost_pin`: the unusable pins file out of the way first (ple4patch never writes over
        it), then the pristine file back (revert, which checks with the transform that the file is
        its backup's patched output; for an older patch id, or without the backup, a reinstall),
        then the apply that records the pin afresh."""
        e = self.engine
        back = (f"`{shell.ple4patch('revert', e.venv)}`"
                if self.backup is BackupState.PRESENT and self.patch_id == PATCH_ID
                else f"reinstall the engine ({reinstall_hint(e)})")
        return (f"move {local_pins_path(self.target)} away (it may be yours: ple4patch does not write over it), "
                f"then {back}, then `{shell.ple4patch('apply', '--allow-unknown', e.venv)}`")

    def modified_fix(self) -> str:
        """The step that brings a `modified` file back, after `corrupt_backup_first`: the pins file's
        (`lost_pin`), another build's revert (`foreign_patch_fix`) or a reinstall, then an apply."""
        if self.lost_pin():
            return self.pins_fix()
        e = self.engine
        return f"{self.foreign_patch_fix()}reinstall the engine ({reinstall_hint(e)}), then `{shell.ple4patch('apply', e.venv)}`"

    def foreign_patch_fix(self) -> str:
        """For a file another ple4patch build patched: the step that build can do."""
        if self.state is State.MODIFIED and self.patch_id is not None and self.patch_id not in self.known_patch_ids:
            return f"`ple4patch revert` with the ple4patch that made {self.patch_id}, or "
        return ""

    def shadow_problem(self) -> str | None:
        """Why the target's bytes do not matter: Python imports another module of its name."""
        if not self.shadowed_by:
            return None
        p = self.shadowed_by[0]
        return (f"{p} is {shadow.what(p)}: Python imports it instead of {self.target}, so that file, "
                f"patched or not, never runs; {self.shadow_fix()}")

    def shadow_fix(self) -> str:
        """What to do about `shadowed_by`: pip leaves a file RECORD does not list (a reinstall
        would not remove it); one it lists is the engine's own (ple4patch cannot patch it)."""
        p = self.shadowed_by[0]
        if _listed_in_record(p, self.engine):
            return (f"the engine's RECORD lists it (this 1cat-vllm build ships it): ple4patch cannot patch a "
                    f"build that imports its own {p.name}; install a build without it")
        return (f"the engine's RECORD does not list it (pip did not install it, and a reinstall leaves "
                f"it): move it away, then run `{shell.ple4patch('apply', self.engine.venv)}`")

    @property
    def target(self) -> Path:
        return self.engine.target

    @property
    def backup_path(self) -> Path:
        return backup_path(self.engine.target)

    @property
    def record_sha256(self) -> str | None:
        return self.engine.record_sha256

    def corrupt_backup_first(self) -> str:
        """The step before any other when the backup path holds a file ple4patch did not make
        (corrupt): only its owner may move it, and nothing else goes on until it is gone."""
        if self.backup is not BackupState.CORRUPT:
            return ""
        q = shell.quote(self.backup_path)
        return f"move {self.backup_path} away (not made by ple4patch; it may be yours: `mv {q} {q}.mine`), then "

    def hashes(self) -> dict:
        return {
            "current": self.current_sha256,
            "record": self.record_sha256,
            "pinned_pristine": self.pin.pristine_sha256 if self.pin else None,
            "pinned_patched": self.pin.patched_sha256 if self.pin else None,
            "backup": self.backup_sha256,
        }


def _listed_in_record(p: Path, engine: Engine) -> bool:
    """Whether the engine's RECORD lists `p` (a file, or for a package a file under it)."""
    try:
        rows = _read_record(engine.dist_info)
        rel = p.relative_to(engine.site_packages).as_posix()
    except (EngineNotFound, ValueError):
        return False
    return rel in rows or any(r.startswith(rel + "/") for r in rows)


def _symlink_fix(engine: Engine) -> str | None:
    """What makes the target writable when it (or a directory on its way) is a symlink, which
    ple4patch never writes through: pip replaces a symlinked file, but writes through a
    symlinked directory, so that link goes first (`Engine.unlink_dir_hint`)."""
    d = engine.symlinked_dir()
    if d is not None:
        return f"{engine.unlink_dir_hint(d)}, then `{shell.ple4patch('apply', engine.venv)}`"
    if readfile.what_is(engine.target) == "a symlink":
        return (f"reinstall the engine ({reinstall_hint(engine)}; pip puts the file in place of the symlink), "
                f"then `{shell.ple4patch('apply', engine.venv)}`")
    return None


def _read_regular(path: Path) -> tuple[bool, bool, bytes | None]:
    """(exists, is a regular non-symlink file, bytes or None if unreadable)."""
    try:
        return True, True, readfile.read_regular(path, follow=False)  # never blocks
    except FileNotFoundError:
        return False, False, None
    except readfile.NotRegular:
        return True, False, None
    except OSError:
        return True, True, None


def assess(engine: Engine, manifest: Manifest) -> Assessment:
    """Read the target and its backup and classify both. `manifest` should include local pins."""
    notes: list[str] = []
    target = engine.target
    current: bytes | None = None
    if readfile.what_is(target) == "a symlink":
        notes.append(f"the target is a symlink (to {os.readlink(target)}): ple4patch will not write through it")
    identity = identity_of(target)  # before the read: a write after it changes the identity
    try:
        current = read_if_exists(target)
    except OSError as exc:
        notes.append(f"cannot read the target: {exc.strerror or exc}")
        current = None
    current_sha = sha256_hex(current) if current is not None else None
    patch_id = None
    if current is not None:
        patch_id = find_patch_id(current.decode("utf-8", errors="replace"))
    c = classify(current_sha, patch_id, engine.record_sha256, manifest)

    b_exists, b_regular, b_bytes = _read_regular(backup_path(target))
    b_sha = sha256_hex(b_bytes) if b_bytes is not None else None
    b_state = classify_backup(
        b_sha,
        exists=b_exists,
        regular=b_regular,
        expected_pristine=c.pristine_sha256,
        record_sha=engine.record_sha256,
        manifest=manifest,
    )

    if c.pin is not None:
        in_range = c.pin.version_matches(engine.version)
        if in_range is False:
            notes.append(
                f"1cat-vllm {engine.version} is outside the pin's range {c.pin.engine_versions!r}; "
                f"the file is recognised by its sha256 anyway"
            )
    if engine.record_sha256 is None and current is not None:
        notes.append("the engine's RECORD lists no sha256 for the target")
    if c.state is State.PATCHED and c.pristine_sha256 is not None and engine.record_sha256 not in (
        None,
        c.pristine_sha256,
    ):
        notes.append("the pristine file this patch was made from differs from the one RECORD lists")
    for p in set_aside_backups(target):
        notes.append(f"a stale backup was set aside earlier: {p} (`{shell.ple4patch('revert', '--clean', engine.venv)}` "
                     "removes it)")
    for p in temp_leftovers(target):
        found = readfile.what_is(p)
        if found == "a regular file":
            notes.append(f"a temp file from an interrupted run is left: {p} (the next apply/revert removes it)")
        else:
            notes.append(f"{p} is {found} under a temp-file name: ple4patch did not make it and leaves it alone")
    shadows = tuple(shadow.shadowing(target, engine.site_packages))
    for p in shadows:
        notes.append(f"{p} is {shadow.what(p)}: Python imports it instead of {target.name}, which "
                     f"then never runs (verify fails, apply refuses until it is moved away)")
    pins_problem = local_pins_problem(target)
    if pins_problem:
        notes.append(f"the venv's local pins are unusable and count as none ({pins_problem})")
    return Assessment(
        engine=engine,
        state=c.state,
        pin=c.pin,
        patch_id=c.patch_id,
        pristine_sha256=c.pristine_sha256,
        current_sha256=current_sha,
        current_bytes=current,
        backup=b_state,
        backup_sha256=b_sha,
        notes=notes,
        current_identity=identity,
        known_patch_ids=frozenset(manifest.patch_ids() | {PATCH_ID}),
        shadowed_by=shadows,
        symlink_fix=_symlink_fix(engine),
        pins_problem=pins_problem,
    )

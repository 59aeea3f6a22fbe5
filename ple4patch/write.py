"""Write a plan to disk, restore a backup, and tidy what killed runs left: under the venv lock.

`locked_assessment` holds the lock and reads the target afresh under it; `write_patch`
lands a `plan.Plan` (set a stale backup aside, write the backup, record a local pin,
replace the target, clean its bytecode) and takes every step back through a
`movelog.MoveLog` when one fails before the target is replaced; `restore` lands the
backup. Each returns the notes that say what it did.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from . import bytecode, fsio, readfile
from . import manifest as manifest_mod
from .engine import Engine
from .errors import ModifiedFile, NotWritable
from .hashing import file_sha256, sha256_hex
from .manifest import Manifest, Pin
from .movelog import MoveLog, lexists
from .paths import STALE_SUFFIX, local_pins_path, set_aside_backups, temp_leftovers
from .plan import Plan
from .sentinel import PATCH_ID
from .state import Assessment, BackupState, State, assess


@contextlib.contextmanager
def locked_assessment(
    engine: Engine,
    base: Manifest,
    lock_timeout: float | None,
    nothing_to_write: Callable[[Assessment], bool],
) -> Iterator[tuple[Assessment, Manifest, NotWritable | None]]:
    """Hold the venv lock and yield the target's state read afresh under it (local pins too).

    When the venv cannot be written (read-only file system, no permission) and
    `nothing_to_write(state)` says the command has nothing to write, there is no error: it
    yields the state read without the lock and the NotWritable (None when locked), and the
    command must then write nothing. A command with nothing to do needs no write access.
    """
    with contextlib.ExitStack() as stack:
        not_writable: NotWritable | None = None
        try:
            fsio.check_writable(engine.state_dir)
            fsio.check_writable(engine.target_dir)
            fsio.refuse_symlink(engine.target)
            stack.enter_context(fsio.locked(engine.state_dir, lock_timeout))
        except NotWritable as err:  # e.g. a read-only image patched when it was built
            not_writable = err
        full = manifest_mod.with_local(base, engine.target)
        a = assess(engine, full)
        if not_writable is not None and not nothing_to_write(a):
            raise not_writable
        if a.state is State.MISSING:
            engine.require_target()
        yield a, full, not_writable


def no_stale_bytecode(a: Assessment) -> bool:
    """No pyc the interpreter would run unchecked instead of the target's current bytes (a stale
    timestamp pyc, e.g. after an image layer changed mtimes, is only recompiled: no need to write)."""
    return not bytecode.unchecked_stale_pycache(a.target)


def remove_temp_leftovers(target: Path) -> list[str]:
    return [f"removed a temp file left by an interrupted run: {p.name}"
            for p in fsio.remove_temp_leftovers(temp_leftovers(target))]


def clean_stale_bytecode(target: Path) -> list[str]:
    removed = bytecode.clean_stale_pycache(target)
    return [f"removed {len(removed)} stale bytecode file(s) left by an interrupted run"] if removed else []


def tidy_leftovers(target: Path) -> list[str]:
    """What a killed run can leave when this run has nothing to write: temp files, and
    bytecode of the old bytes (killed between the replace and the bytecode clean-up)."""
    return remove_temp_leftovers(target) + clean_stale_bytecode(target)


def _set_aside_by_us(path: Path) -> bool:
    """A regular file whose bytes still match the sha256 its set-aside name carries (`set_aside`
    names it so): anything else under such a name is not ple4patch's to remove."""
    tag = path.name.rpartition(STALE_SUFFIX)[2].partition("-")[0]
    try:
        data = readfile.read_regular(path, follow=False)
    except OSError:
        return False
    return len(tag) == 12 and sha256_hex(data).startswith(tag)


def clean_set_aside(target: Path, clean: bool) -> list[str]:
    if not clean:
        return []
    notes = []
    for p in set_aside_backups(target):
        if not _set_aside_by_us(p):
            notes.append(f"{p.name} has a set-aside name but not the bytes ple4patch set aside under it: "
                         f"left alone (not removed by --clean)")
        elif fsio.remove(p):
            notes.append(f"removed the set-aside backup {p.name} (--clean)")
    return notes


@dataclass
class Written:
    """What `write_patch` or `restore` did."""

    notes: list[str] = field(default_factory=list)
    pycache_removed: list[Path] = field(default_factory=list)
    pin: Pin | None = None  # write_patch: the pin the output is recognised by


def _record_local_pin(a: Assessment, plan: Plan, log: MoveLog, notes: list[str]) -> Pin:
    """Add a local pin for an unpinned file applied with --allow-unknown (logged for undo)."""
    target = a.target
    pin = manifest_mod.local_pin(
        pristine=plan.source_sha,
        patched=plan.output_sha,
        patch_id=PATCH_ID,
        version=a.engine.version,
        size=len(plan.source),
    )
    pins = local_pins_path(target)
    data = manifest_mod.add_local_pin(manifest_mod.load_local(target), pin).dumps().encode()
    problem = manifest_mod.local_pins_problem(target)
    if problem is not None:  # not ple4patch's pins, or damaged: never written over
        raise ModifiedFile(
            f"{pins} is unusable ({problem}): nothing written; ple4patch does not write over it: "
            f"move it away, then run `ple4patch apply --allow-unknown {a.engine.venv}` again"
        )
    try:
        before = readfile.read_if_regular(pins, follow=False)
    except OSError:
        before = None
    if before == data:
        notes.append(f"the local pin in {pins} stands (recorded by an earlier run)")
        return pin
    if before is None:
        log.created(pins)
    else:  # the old bytes stay under a temp name until the patch lands
        log.replaced(pins, fsio.keep_aside(pins))
    fsio.atomic_write(pins, data, mode=0o644)
    notes.append(f"recorded a local pin in {pins}")
    return pin


def write_patch(a: Assessment, plan: Plan) -> Written:
    """Land `plan`: until the target is replaced, any failure (not writable, disk full,
    Ctrl-C) takes every step back, so the venv is exactly as before; once the patch has
    landed, its result stays."""
    target = a.target
    bak = a.backup_path
    notes = remove_temp_leftovers(target)
    log = MoveLog()
    try:
        if not plan.from_backup and a.backup is BackupState.STALE:
            aside = fsio.set_aside(bak, a.backup_sha256)
            log.renamed(bak, aside)
            notes.append(
                f"the old backup was stale (a pristine file of another version, not made from this "
                f"file); set aside as {aside.name}, it will never be restored "
                f"(`ple4patch revert --clean` removes it)"
            )
        if not plan.from_backup:
            if not lexists(bak):
                log.created(bak)
            if fsio.write_backup(bak, plan.source, like=target):
                notes.append(f"backup written: {bak.name}")
        fsio.fault("after-backup")
        pin = plan.pin
        if pin is None:
            pin = _record_local_pin(a, plan, log, notes)
            fsio.fault("after-pins")
        hardlinked = os.stat(target).st_nlink > 1
        fsio.atomic_write(target, plan.output, like=target, fault_temp=True)
    except BaseException:
        if file_sha256(target) == plan.source_sha:  # the target still holds its old bytes
            log.rollback()
        raise
    log.commit()
    if hardlinked:
        notes.append("the target was hard-linked: it now has a new inode, the other links keep the old bytes")
    fsio.fault("after-replace")
    removed, pyc_notes = bytecode.clean_pycache_noted(target, venv=a.engine.venv)
    fsio.fault("after-pycache")
    if removed:
        notes.append(f"removed {len(removed)} stale bytecode file(s)")
    return Written(notes + pyc_notes, removed, pin)


def restore(a: Assessment, clean: bool) -> Written:
    """Put the backup's pristine bytes back over the target and remove the backup."""
    target = a.target
    data = readfile.read_regular(a.backup_path, follow=False)
    if sha256_hex(data) != a.backup_sha256:  # changed since assessed: we hold the lock, so never
        raise ModifiedFile(f"{a.backup_path} changed while reverting: nothing written; run revert again")
    fsio.atomic_write(target, data, like=target, fault_temp=True)
    fsio.fault("after-replace")
    notes: list[str] = []
    try:  # the target is pristine now: a backup left beside it is harmless (the next revert removes it)
        fsio.remove(a.backup_path)
    except NotWritable as err:
        notes.append(f"could not remove the backup ({err}); harmless: it is identical to the target")
    fsio.fault("after-backup-removed")
    removed, pyc_notes = bytecode.clean_pycache_noted(target, venv=a.engine.venv)
    fsio.fault("after-pycache")
    notes += pyc_notes
    try:
        notes += clean_set_aside(target, clean)
    except NotWritable as err:
        notes.append(f"could not remove a set-aside backup ({err})")
    if removed:
        notes.append(f"removed {len(removed)} stale bytecode file(s)")
    return Written(notes, removed)

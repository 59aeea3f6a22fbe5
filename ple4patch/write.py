"""Write a plan to disk, restore a backup, and tidy what killed runs left: under the venv lock.

`locked_set` holds the lock and reads the set of files afresh under it; `write_set` lands one `plan.Plan` per file that needs one: first every
backup (a stale one set aside, a local pin recorded for an unpinned file), then, when more than
one file is replaced, the journal, then the replaces, then the journal is removed and the
bytecode cleaned. Any failure before the first replace takes every step back through one
`movelog.MoveLog`; a failure or a kill after it leaves the journal, and the next apply or revert
converges the set. `restore_set` is the same for revert (journal, replaces, backups removed).
`write_patch` / `restore` are the one-file cases. Each returns the notes that say what it did.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from . import bytecode, fsio, readfile, shell
from . import manifest as manifest_mod
from .engine import Engine, reinstall_hint
from .errors import ChangedDuringRun, ModifiedFile, NotWritable
from .hashing import file_sha256, sha256_hex
from .manifest import Manifest, Pin
from .movelog import MoveLog, lexists
from . import fileset
from .fileset import SetAssessment, assess_set
from .paths import STALE_SUFFIX, local_pins_path, rel_of, set_aside_backups, temp_leftovers
from .plan import Plan
from .sentinel import PATCH_ID
from .state import Assessment, BackupState, State


def with_local_pins(base: Manifest, engine: Engine) -> Manifest:
    """`base` plus the venv's local pins of every file of the set."""
    full = base
    for member in fileset.members(engine):
        full = manifest_mod.with_local(full, member.target)
    return full


@contextlib.contextmanager
def locked_set(
    engine: Engine,
    base: Manifest,
    lock_timeout: float | None,
    nothing_to_write: Callable[[SetAssessment], bool],
) -> Iterator[tuple[SetAssessment, Manifest, NotWritable | None]]:
    """Hold the venv lock and yield the set read afresh under it (every file, its local pins and
    the journal); the directories of every file of the set must be writable.

    When the venv cannot be written (read-only file system, no permission) and
    `nothing_to_write(set)` says the command has nothing to write, there is no error: it
    yields the set read without the lock and the NotWritable (None when locked), and the
    command must then write nothing. A command with nothing to do needs no write access.
    """
    with contextlib.ExitStack() as stack:
        not_writable: NotWritable | None = None
        try:
            fsio.check_writable(engine.state_dir)
            for member in fileset.members(engine):
                fsio.check_writable(member.target_dir)
                fsio.refuse_symlink(member.target, f"install the engine normally ({reinstall_hint(engine)})")
            stack.enter_context(fsio.locked(engine.state_dir, lock_timeout))
        except NotWritable as err:
            not_writable = err
        full = with_local_pins(base, engine)
        s = assess_set(engine, full)
        if not_writable is not None and not nothing_to_write(s):
            raise not_writable
        if s.layer.state is State.MISSING:
            engine.require_target()
        if not_writable is None:
            fileset.check_journal_slot(engine.site_packages)
        yield s, full, not_writable


def no_stale_bytecode(a: Assessment) -> bool:
    """No pyc the interpreter would run unchecked instead of the target's current bytes (a stale
    timestamp pyc, e.g. after an image layer changed mtimes, is only recompiled: no need to write)."""
    return not bytecode.unchecked_stale_pycache(a.target)


def remove_temp_leftovers(target: Path) -> list[str]:
    return [f"removed a temp file left by an interrupted run: {p}"
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
            notes.append(f"{p} has a set-aside name but not the bytes ple4patch set aside under it: "
                         f"left alone (not removed by --clean)")
        elif fsio.remove(p):
            notes.append(f"removed the set-aside backup {p} (--clean)")
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
        target=rel_of(target),
    )
    pins = local_pins_path(target)
    data = manifest_mod.add_local_pin(manifest_mod.load_local(target), pin).dumps().encode()
    problem = manifest_mod.local_pins_problem(target)
    if problem is not None:  # not ple4patch's pins, or damaged: never written over
        raise ModifiedFile(
            f"{pins} is unusable ({problem}): nothing written; ple4patch does not write over it: "
            f"move it away, then run `{shell.ple4patch('apply', '--allow-unknown', a.engine.venv)}` again"
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


def _prepare(a: Assessment, plan: Plan, log: MoveLog, notes: list[str]) -> Pin:
    """Everything before `a`'s target is replaced: a stale backup set aside, the backup written,
    a local pin recorded (each step logged for the undo)."""
    bak = a.backup_path
    if not plan.from_backup and a.backup is BackupState.STALE:
        aside = fsio.set_aside(bak, a.backup_sha256)
        log.renamed(bak, aside)
        notes.append(
            f"the old backup was stale (a pristine file of another version, not made from this "
            f"file); set aside as {aside}, it will never be restored "
            f"(`{shell.ple4patch('revert', '--clean', a.engine.venv)}` removes it)"
        )
    if not plan.from_backup:
        if not lexists(bak):
            log.created(bak)
        if fsio.write_backup(bak, plan.source, like=a.target):
            notes.append(f"backup written: {bak}")
    pin = plan.pin
    if pin is None:
        pin = _record_local_pin(a, plan, log, notes)
    return pin


def xattrs_dropped_notes(target: Path, dropped: list[str]) -> list[str]:
    """The note that names the extended attributes of `target` the new file could not take."""
    if not dropped:
        return []
    return [f"{target} had extended attribute(s) that could not be copied onto its new bytes, now "
            f"dropped: {', '.join(dropped)} (set them again as their owner, e.g. with setfattr/setfacl)"]


def _replaced_notes(items: list[tuple[Assessment, Plan]], hardlinked: list[Path]) -> list[str]:
    return [f"{'the target' if p == items[0][0].target else p} was hard-linked: it now has a new "
            f"inode, the other links keep the old bytes" for p in hardlinked]


def unchanged_since_assessed(a: Assessment, command: str) -> Callable[[], None]:
    """A check that `a`'s target still is the file that was assessed (same sha256, same inode,
    size and mtime): the lock keeps other ple4patch runs out, not pip or an editor."""

    def check() -> None:
        if fsio.identity_of(a.target) == a.current_identity and file_sha256(a.target) == a.current_sha256:
            return
        raise ChangedDuringRun(
            f"{a.target} changed while ple4patch was working (another program, such as pip or an "
            f"editor, wrote it meanwhile): this {command} took back what it wrote, so every file "
            f"is as before it or as that program left it; run it again (`ple4patch {command} "
            f"{a.engine.venv}`)"
        )

    return check


def _still(target: Path, sha: str) -> Callable[[], None]:
    """A check that `target` still holds the bytes this run wrote (before they are taken back)."""

    def check() -> None:
        if file_sha256(target) != sha:
            raise ModifiedFile(f"another program wrote {target} too")
    return check


def _take_back(done: list[tuple[Assessment, bytes, str]], changed: ChangedDuringRun,
               undo_rest: Callable[[], None], keep_rest: Callable[[], None], command: str) -> None:
    """Another program wrote a file of the set: put back the bytes each file this run replaced
    had (`done`: the file, its bytes before, the sha256 this run wrote), newest first, then
    `undo_rest` (backups, pins, journal). If a file cannot be put back, `keep_rest` keeps the
    journal, so the next run converges the set as after a kill. Raises `changed` (or why not)."""
    try:
        for a, before, wrote in reversed(done):
            fsio.atomic_write(a.target, before, like=a.target, before_replace=_still(a.target, wrote))
    except BaseException as exc:
        keep_rest()
        if not isinstance(exc, Exception):  # Ctrl-C: the journal finishes the set next time
            raise
        raise ChangedDuringRun(
            f"{changed} -- but {a.target} could not be put back ({exc}): the journal stays; run "
            f"`ple4patch {command} {a.engine.venv}` again to bring every file of the set to one state"
        ) from None
    undo_rest()
    raise changed


def write_set(items: list[tuple[Assessment, Plan]]) -> list[Written]:
    """Land one plan per file, all or nothing: until the first target is replaced any failure
    (not writable, disk full, Ctrl-C) takes every step back, so the venv is exactly as before;
    from then on the journal names the set, and a failure leaves it for the next run. Right
    before each replace the target is checked to be still the file assessed: if another program
    wrote a file of the set meanwhile, every step is taken back (`ChangedDuringRun`)."""
    assert items
    site = items[0][0].engine.site_packages
    notes = [n for a, _plan in items for n in remove_temp_leftovers(a.target)]
    per_file: list[list[str]] = [[] for _ in items]
    log = MoveLog()
    pins: list[Pin] = []
    done: list[tuple[Assessment, bytes, str]] = []
    journaled = len(items) > 1
    try:
        for (a, plan), file_notes in zip(items, per_file):
            pins.append(_prepare(a, plan, log, file_notes))
        fsio.fault("after-backup")
        if any(plan.pin is None for _a, plan in items):
            fsio.fault("after-pins")
        if journaled:
            log.created(fileset.write_journal(site, "apply", {
                rel_of(a.target): {"pristine_sha256": plan.source_sha, "patched_sha256": plan.output_sha}
                for a, plan in items
            }))
            fsio.fault("after-journal")
        for a, _plan in items:  # every file first: none is replaced when another changed
            unchanged_since_assessed(a, "apply")()
        hardlinked = [a.target for a, _plan in items if os.stat(a.target).st_nlink > 1]
        for i, (a, plan) in enumerate(items):
            if i:
                fsio.fault("between-replaces")
            assert a.current_bytes is not None
            dropped = fsio.atomic_write(a.target, plan.output, like=a.target, fault_temp=(i == 0),
                                        before_replace=unchanged_since_assessed(a, "apply"))
            done.append((a, a.current_bytes, plan.output_sha))
            per_file[i] += xattrs_dropped_notes(a.target, dropped)
    except ChangedDuringRun as changed:
        _take_back(done, changed, log.rollback, log.commit, "apply")
        raise
    except BaseException:
        if done:  # the journal (if any) converges the set
            log.commit()
        elif file_sha256(items[0][0].target) == items[0][1].source_sha:  # nothing replaced yet
            log.rollback()
        raise
    log.commit()
    notes += _replaced_notes(items, hardlinked)
    fsio.fault("after-replace")
    if journaled:
        fileset.remove_journal(site)
    cleaned = [bytecode.clean_pycache_noted(a.target, venv=a.engine.venv) for a, _plan in items]
    removed_all: list[list[Path]] = [removed for removed, _pyc_notes in cleaned]
    for file_notes, (_removed, pyc_notes) in zip(per_file, cleaned):
        file_notes += pyc_notes
    fsio.fault("after-pycache")
    out = []
    for i, ((a, plan), file_notes, removed, pin) in enumerate(zip(items, per_file, removed_all, pins)):
        extra = notes if i == 0 else []
        if removed:
            file_notes.append(f"removed {len(removed)} stale bytecode file(s)" + (f" of {a.target}" if i else ""))
        out.append(Written(extra + file_notes, removed, pin))
    return out


def write_patch(a: Assessment, plan: Plan) -> Written:
    """Land one file's plan (`write_set` of one)."""
    return write_set([(a, plan)])[0]


def restore_set(files: list[Assessment], clean: bool) -> list[Written]:
    """Put each backup's pristine bytes back over its target and remove the backups: with more
    than one file, under the journal (a kill converges on the next run)."""
    assert files
    site = files[0].engine.site_packages
    datas = []
    for a in files:
        data = readfile.read_regular(a.backup_path, follow=False)
        if sha256_hex(data) != a.backup_sha256:  # changed since assessed: we hold the lock, so never
            raise ModifiedFile(f"{a.backup_path} changed while reverting: nothing written; run revert again")
        datas.append(data)
    journaled = len(files) > 1
    if journaled:
        fileset.write_journal(site, "revert", {
            rel_of(a.target): {"pristine_sha256": a.backup_sha256, "patched_sha256": a.current_sha256}
            for a in files
        })
        fsio.fault("after-journal")
    done: list[tuple[Assessment, bytes, str]] = []
    dropped_notes: dict[Path, list[str]] = {}
    try:
        for a in files:  # every file first: none is replaced when another changed
            unchanged_since_assessed(a, "revert")()
        for i, (a, data) in enumerate(zip(files, datas)):
            if i:
                fsio.fault("between-replaces")
            assert a.current_bytes is not None
            dropped = fsio.atomic_write(a.target, data, like=a.target, fault_temp=(i == 0),
                                        before_replace=unchanged_since_assessed(a, "revert"))
            done.append((a, a.current_bytes, sha256_hex(data)))
            dropped_notes[a.target] = xattrs_dropped_notes(a.target, dropped)
    except ChangedDuringRun as changed:
        _take_back(done, changed, lambda: journaled and fileset.remove_journal(site), lambda: None, "revert")
        raise
    fsio.fault("after-replace")
    kept: dict[Path, str] = {}
    for a in files:
        try:  # the target is pristine now: a backup left beside it is harmless (the next revert removes it)
            fsio.remove(a.backup_path)
        except NotWritable as err:
            kept[a.target] = f"could not remove the backup ({err}); harmless: it is identical to the target"
    fsio.fault("after-backup-removed")
    if journaled:
        fileset.remove_journal(site)
    out = []
    for i, a in enumerate(files):
        removed, pyc_notes = bytecode.clean_pycache_noted(a.target, venv=a.engine.venv)
        notes = ([kept[a.target]] if a.target in kept else []) + dropped_notes.get(a.target, []) + pyc_notes
        try:
            notes += clean_set_aside(a.target, clean)
        except NotWritable as err:
            notes.append(f"could not remove a set-aside backup ({err})")
        if removed:
            notes.append(f"removed {len(removed)} stale bytecode file(s)" + (f" of {a.target}" if i else ""))
        out.append(Written(notes, removed))
    fsio.fault("after-pycache")
    return out


def restore(a: Assessment, clean: bool) -> Written:
    """Put the backup's pristine bytes back over the target and remove the backup."""
    return restore_set([a], clean)[0]

"""`ple4patch revert`: put the pristine files of the set back from their backups and remove them.

Under the venv lock: assess every file of the set -> restore the backups (`write.restore_set`,
under the journal when more than one file) of the files they restore, else tidy what is left
(leftover backups, set-aside backups with --clean, temp files, stale bytecode, a killed run's
journal) -> report. A file of the set that its backup cannot restore is refused before anything
is written, and nothing is written.
"""

from __future__ import annotations

import os

from .. import fsio, readfile, render, set_report, shell, write
from .. import manifest as manifest_mod
from ..engine import find_target, reinstall_hint
from ..errors import EXIT_OK, ModifiedFile, NotWritable
from ..fileset import SetAssessment, assess_set, remove_journal
from ..manifest import Manifest
from ..paths import rel_of, set_aside_backups
from ..plan import is_patched_output_of
from ..result import Result
from ..state import Assessment, BackupState, State


def _pristine(a: Assessment) -> bool:
    return a.state in (State.PRISTINE, State.UNPINNED)


def run(
    venv: str | os.PathLike | None = None,
    *,
    clean: bool = False,
    manifest: Manifest | None = None,
    lock_timeout: float | None = None,
) -> Result:
    engine = find_target(venv, command="revert")
    base = manifest if manifest is not None else manifest_mod.load()

    def nothing_to_write(s: SetAssessment) -> bool:  # pristine; and --clean has nothing to remove
        if s.journal is not None or s.journal_problem is not None:
            return False
        if clean and s.orphans:
            return False
        for a in s.files:
            if not _pristine(a) or not write.no_stale_bytecode(a):
                return False
            if clean and (a.backup is BackupState.STALE or set_aside_backups(a.target)):
                return False
        return True

    with write.locked_set(engine, base, lock_timeout, nothing_to_write) as (s, full, not_writable):
        if not_writable is not None:  # read-only, and nothing to revert: write nothing at all
            return _nothing_to_revert(s, clean, [], not_writable)
        notes: list[str] = []
        for a in s.files:
            notes += write.remove_temp_leftovers(a.target)
        if clean:
            notes += [f"removed {p}, the backup of a file this engine version no longer has in its patch set (--clean)"
                      for p in s.orphans if fsio.remove(p)]
        if s.journal is not None or s.journal_problem is not None:
            what = f"an interrupted {s.journal.direction}" if s.journal is not None else "an unreadable journal"
            notes.append(f"found {what} ({', '.join(s.rels)}); this revert brings the whole set to pristine")
        restore: list[Assessment] = []
        for a in s.files:
            if _pristine(a):
                continue
            if _restorable(a, notes):
                restore.append(a)
                continue
            if a.state is not State.MODIFIED:
                why, fix = f"its backup is {a.backup.value}", "Restore the engine with "
            elif a.foreign_patch_fix():  # another ple4patch build's patch: that build can revert it
                why, fix = f"it {a.modified_why()}", f"Run {a.foreign_patch_fix()}restore the engine with "
            else:
                why, fix = "it is not the patched output of the backup (modified or foreign)", "Restore the engine with "
            raise ModifiedFile(f"cannot revert {a.target}: {why}; nothing written. {fix}{reinstall_hint(engine)}")
        if restore:
            written = write.restore_set(restore, clean)
            remove_journal(engine.site_packages)  # a killed run's: the set is pristine now
            return _restored(s, restore, full, notes, written, clean)
        remove_journal(engine.site_packages)
        return _nothing_to_revert(s, clean, notes, None)


def _restorable(a: Assessment, notes: list[str]) -> bool:
    if a.state in (State.PATCHED, State.PATCHED_OLDER) and a.backup is BackupState.PRESENT:
        return True
    if (
        a.state is State.MODIFIED
        and a.patch_id is not None
        and a.backup is not BackupState.ABSENT
        and a.current_bytes is not None
        and a.backup_sha256 is not None
        and is_patched_output_of(readfile.read_regular(a.backup_path, follow=False), a.current_bytes,
                                 rel_of(a.target))
    ):
        notes.append(f"no pin links the files; the transform confirmed {a.target} is the backup's patched output")
        return True
    return False


def _restored(s: SetAssessment, restored: list[Assessment], manifest: Manifest, notes: list[str],
              written: list[write.Written], clean: bool) -> Result:
    notes = notes + [n for w in written for n in w.notes]
    # the files that needed no restore: tidy them like a pristine set (leftover backups, --clean)
    for a in s.files:
        if a not in restored:
            notes += _tidy_pristine(a, clean)
    if not clean:
        kept = [p for a in s.files for p in set_aside_backups(a.target)]
        if kept:
            notes.append(f"set-aside backup(s) of an earlier engine version stay (never restored): "
                         f"{', '.join(map(str, kept))}; `{shell.ple4patch('revert', '--clean', s.engine.venv)}` "
                         "removes them")
    lines = [f"reverted: {a.target}: pristine again, backup removed" for a in restored]
    after = assess_set(s.engine, manifest)  # what --json reports: the files now
    data = {**set_report.report_after(s, after), "changed": True, "restored": True,
            "pycache_removed": [str(p) for w in written for p in w.pycache_removed]}
    restored_targets = {a.target for a in restored}
    for entry, now in zip(data["files"], after.files):
        entry["restored"] = now.target in restored_targets
    data["notes"] = data["notes"] + notes
    return Result("revert", EXIT_OK, render.with_notes("\n".join(lines), notes), data)


def _corrupt_note(a: Assessment) -> str:
    what = "sha256 " + a.backup_sha256[:12] if a.backup_sha256 else "not a readable regular file"
    return (f"{a.backup_path} is not a backup ple4patch made of any known file (corrupt: {what}); "
            f"ple4patch never removes, moves or restores it (--clean included): it may be yours")


def _tidy_pristine(a: Assessment, clean: bool) -> list[str]:
    notes = write.clean_stale_bytecode(a.target)
    if a.backup is BackupState.PRESENT:
        fsio.remove(a.backup_path)
        notes.append(f"removed a leftover backup identical to the target ({a.backup_path})")
    elif a.backup is BackupState.CORRUPT:  # not made by ple4patch from any known file: maybe yours
        notes.append(_corrupt_note(a))
    elif a.backup is BackupState.STALE:
        if clean:
            fsio.remove(a.backup_path)
            notes.append(f"removed the {a.backup.value} backup {a.backup_path} (--clean)")
        else:
            notes.append(
                f"the backup {a.backup_path} is {a.backup.value}: it belongs to another engine "
                f"version or build (the engine was upgraded or reinstalled since apply) and is never "
                f"written over this file; `{shell.ple4patch('revert', '--clean', a.engine.venv)}` removes it"
            )
    return notes + write.clean_set_aside(a.target, clean)


def _nothing_to_revert(s: SetAssessment, clean: bool, notes: list[str], not_writable: NotWritable | None) -> Result:
    """Pristine or as shipped: nothing to restore. Tidies leftovers when the venv is writable
    (`not_writable` is None); otherwise writes nothing and says so."""
    a = s.layer
    msg = f"nothing to revert: {a.target} is {a.state.value}"
    if len(s.files) > 1:
        states = " or ".join(dict.fromkeys(f.state.value for f in s.files))
        msg = f"nothing to revert: the {len(s.files)} files of the set are {states}"
    if not_writable is not None:
        notes.append(f"the venv is not writable ({not_writable}); nothing was needed, nothing written")
        for f in s.files:
            if f.backup is BackupState.PRESENT:
                notes.append(f"a leftover backup identical to the target stays ({f.backup_path}; harmless)")
            elif f.backup is BackupState.CORRUPT:
                notes.append(_corrupt_note(f))
            elif f.backup is BackupState.STALE:
                notes.append(
                    f"the backup {f.backup_path} is {f.backup.value}: it belongs to another engine "
                    f"version or build and is never written over this file; "
                    f"`{shell.ple4patch('revert', '--clean', f.engine.venv)}` removes it"
                )
    else:
        for f in s.files:
            notes += _tidy_pristine(f, clean)
    data = {**set_report.report(s), "changed": False, "restored": False}
    data["notes"] = data["notes"] + notes
    return Result("revert", EXIT_OK, render.with_notes(msg, notes), data)

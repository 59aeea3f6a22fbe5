"""`ple4patch revert`: put the pristine file back from the backup and remove the backup.

Under the venv lock: assess -> restore the backup (`write.restore`) when it restores this
target, else tidy what is left (leftover backups, set-aside backups with --clean, temp
files, stale bytecode) -> report. A target the backup cannot restore is refused, and
nothing is written.
"""

from __future__ import annotations

import os

from .. import fsio, readfile, render, write
from .. import manifest as manifest_mod
from ..engine import find_target, reinstall_hint
from ..errors import EXIT_OK, ModifiedFile, NotWritable
from ..manifest import Manifest
from ..paths import set_aside_backups
from ..plan import is_patched_output_of
from ..result import Result
from ..state import Assessment, BackupState, State, assess


def run(
    venv: str | os.PathLike | None = None,
    *,
    clean: bool = False,
    manifest: Manifest | None = None,
    lock_timeout: float | None = None,
) -> Result:
    engine = find_target(venv)
    base = manifest if manifest is not None else manifest_mod.load()

    def nothing_to_write(a: Assessment) -> bool:  # pristine; and --clean has nothing to remove
        if a.state not in (State.PRISTINE, State.UNPINNED) or not write.no_stale_bytecode(a):
            return False
        return not (clean and (a.backup is BackupState.STALE or set_aside_backups(engine.target)))

    with write.locked_assessment(engine, base, lock_timeout, nothing_to_write) as (a, full, not_writable):
        if not_writable is not None:  # read-only, and nothing to revert: write nothing at all
            return _nothing_to_revert(a, clean, [], not_writable)
        notes = write.remove_temp_leftovers(engine.target)
        restorable = a.state in (State.PATCHED, State.PATCHED_OLDER) and a.backup is BackupState.PRESENT
        if (
            not restorable
            and a.state is State.MODIFIED
            and a.patch_id is not None
            and a.backup is not BackupState.ABSENT
            and a.current_bytes is not None
            and a.backup_sha256 is not None
        ):
            restorable = is_patched_output_of(readfile.read_regular(a.backup_path, follow=False), a.current_bytes)
            if restorable:
                notes.append("no pin links the files; the transform confirmed the target is the backup's patched output")
        if restorable:
            return _restored(a, full, notes, write.restore(a, clean))
        if a.state in (State.PATCHED, State.PATCHED_OLDER, State.MODIFIED):
            why = (
                f"its backup is {a.backup.value}"
                if a.state is not State.MODIFIED
                else "it is not the patched output of the backup (modified or foreign)"
            )
            raise ModifiedFile(
                f"cannot revert {engine.target}: {why}; nothing written. Restore the engine with "
                f"{reinstall_hint(engine)}"
            )
        return _nothing_to_revert(a, clean, notes, None)


def _restored(a: Assessment, manifest: Manifest, notes: list[str], written: write.Written) -> Result:
    notes = notes + written.notes
    msg = f"reverted: {a.target} holds its pristine bytes again (sha256 {a.backup_sha256}); backup removed"
    return Result(
        "revert",
        EXIT_OK,
        render.with_notes(msg, notes),
        {
            **render.report(a),
            "state_before": a.state.value,
            "state": assess(a.engine, manifest).state.value,
            "changed": True,
            "restored": True,
            "notes": a.notes + notes,
            "pycache_removed": [str(p) for p in written.pycache_removed],
        },
    )


def _nothing_to_revert(a: Assessment, clean: bool, notes: list[str], not_writable: NotWritable | None) -> Result:
    """Pristine or as shipped: nothing to restore. Tidies leftovers when the venv is writable
    (`not_writable` is None); otherwise writes nothing and says so."""
    engine = a.engine
    msg = f"nothing to revert: {engine.target} is {render.state_line(a)}; nothing to do"
    if not_writable is not None:
        notes.append(f"the venv is not writable ({not_writable}); nothing was needed, nothing written")
    else:
        notes += write.clean_stale_bytecode(engine.target)
    if a.backup is BackupState.PRESENT:
        if not_writable is None:
            fsio.remove(a.backup_path)
            notes.append(f"removed a leftover backup identical to the target ({a.backup_path.name})")
        else:
            notes.append(f"a leftover backup identical to the target stays ({a.backup_path.name}; harmless)")
    elif a.backup is BackupState.CORRUPT:  # not made by ple4patch from any known file: maybe yours
        notes.append(
            f"{a.backup_path.name} is not a backup ple4patch made of any known file (corrupt: "
            f"{'sha256 ' + a.backup_sha256[:12] if a.backup_sha256 else 'not a readable regular file'}); "
            f"ple4patch never removes, moves or restores it (--clean included): it may be yours"
        )
    elif a.backup is BackupState.STALE:
        if clean:  # only when writable: nothing_to_write refuses --clean with such a backup
            fsio.remove(a.backup_path)
            notes.append(f"removed the {a.backup.value} backup {a.backup_path.name} (--clean)")
        else:
            notes.append(
                f"the backup {a.backup_path.name} is {a.backup.value}: it belongs to another engine "
                f"version or build (the engine was upgraded or reinstalled since apply) and is never "
                f"written over this file; `ple4patch revert --clean {engine.venv}` removes it"
            )
    if not_writable is None:
        notes += write.clean_set_aside(engine.target, clean)
    return Result(
        "revert",
        EXIT_OK,
        render.with_notes(msg, notes),
        {**render.report(a), "changed": False, "restored": False, "notes": a.notes + notes},
    )

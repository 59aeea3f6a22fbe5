"""`ple4patch verify`: exit 0 only if every file of the set is the exact patched output and its
backup restores the pristine file, and no interrupted run is left (reads only)."""

from __future__ import annotations

import os

from .. import manifest as manifest_mod
from .. import bytecode, set_report, shell, write
from ..engine import find_target, reinstall_hint
from ..errors import EXIT_OK, VerifyFailed
from ..fileset import assess_set
from ..manifest import Manifest
from ..result import Result
from ..sentinel import PATCH_ID
from ..state import BackupState, State


def _next(a, opt_in: bool) -> str:
    """The step that makes verify pass, when there is one that certainly does; `opt_in`: a file of
    the set is unpinned, so the apply that patches the set needs --allow-unknown."""
    e = a.engine
    apply = shell.ple4patch("apply", *(["--allow-unknown"] if opt_in else []), e.venv)
    if a.state is State.UNPINNED:
        return (f": {a.corrupt_backup_first()}review with `{shell.ple4patch('apply', '--dry-run', e.venv)}`, "
                f"then run `{apply}`")
    if a.state is State.PRISTINE or (a.state is State.PATCHED_OLDER and a.backup is BackupState.PRESENT):
        return f": {a.corrupt_backup_first()}run `{apply}`"
    if a.lost_pin():  # its local pins file is unusable: that file first
        return f": {a.corrupt_backup_first()}{a.pins_fix()}"
    if a.state in (State.PATCHED_OLDER, State.MODIFIED):
        return f": {a.corrupt_backup_first()}{a.foreign_patch_fix()}reinstall the engine ({reinstall_hint(e)}), then run `{apply}`"
    return ""


def run(venv: str | os.PathLike | None = None, *, manifest: Manifest | None = None) -> Result:
    engine = find_target(venv, command="verify")
    s = assess_set(engine, write.with_local_pins(manifest if manifest is not None else manifest_mod.load(), engine))
    if s.layer.state is State.MISSING:
        engine.require_target()
    if s.journal is not None:
        raise VerifyFailed(
            f"an interrupted {s.journal.direction} left {s.journal.path}: run "
            f"`{shell.ple4patch('apply', engine.venv)}` (or revert) to finish the set"
        )
    lines = []
    for a in s.files:
        if a.state is not State.PATCHED:
            why = f" (it {a.modified_why()})" if a.state is State.MODIFIED and a.patch_id else ""
            opt_in = any(f.state is State.UNPINNED for f in s.files)
            raise VerifyFailed(f"{a.target} is {a.state.value}, not patched{why}" + _next(a, opt_in))
        assert a.pin is not None
        if a.shadow_problem():
            raise VerifyFailed(f"{a.target} is patched, but {a.shadow_problem()}")
        if a.backup is not BackupState.PRESENT:
            raise VerifyFailed(
                f"{a.target} is patched but its backup is {a.backup.value}, so revert could not "
                f"restore the pristine file (expected sha256 {a.pin.pristine_sha256}): "
                f"{a.corrupt_backup_first()}reinstall the engine ({reinstall_hint(engine)}), then run "
                f"`{shell.ple4patch('apply', engine.venv)}`"
            )
        stale = bytecode.unchecked_stale_pycache(a.target)
        if stale:
            raise VerifyFailed(
                f"{a.target} is patched, but {stale[0]} is an unchecked-hash pyc of other bytes: Python "
                f"would run it (the old code) instead of the file; run `{shell.ple4patch('apply', engine.venv)}` as a "
                f"user who can write in {stale[0].parent} to remove it"
            )
        lines.append(f"ok: {a.target} is exactly patched (sha256 {a.current_sha256})")
        lines.append(f"    its backup restores the pristine file (sha256 {a.backup_sha256})")
    pinned = f"; file pinned as {s.layer.pin.shown_label}" if s.layer.pin else ""
    lines.append(f"engine:  1cat-vllm {engine.version} in {engine.venv}, patch {PATCH_ID}{pinned}")
    return Result("verify", EXIT_OK, "\n".join(lines), set_report.report(s))

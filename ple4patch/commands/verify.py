"""`ple4patch verify`: exit 0 only if the target is the exact patched output and its backup
restores the pristine file (reads only)."""

from __future__ import annotations

import os

from .. import manifest as manifest_mod
from .. import bytecode, render
from ..engine import find_target, reinstall_hint
from ..errors import EXIT_OK, VerifyFailed
from ..manifest import Manifest
from ..result import Result
from ..sentinel import PATCH_ID
from ..state import BackupState, State, assess


def _next(a) -> str:
    """The step that makes verify pass, when there is one that certainly does."""
    e = a.engine
    if a.state is State.PRISTINE or (a.state is State.PATCHED_OLDER and a.backup is BackupState.PRESENT):
        return f": {a.corrupt_backup_first()}run `ple4patch apply {e.venv}`"
    if a.state in (State.PATCHED_OLDER, State.MODIFIED):
        return f": {a.corrupt_backup_first()}reinstall the engine ({reinstall_hint(e)}), then run `ple4patch apply {e.venv}`"
    return ""


def run(venv: str | os.PathLike | None = None, *, manifest: Manifest | None = None) -> Result:
    engine = find_target(venv)
    a = assess(engine, manifest_mod.for_target(manifest, engine.target))
    if a.state is State.MISSING:
        engine.require_target()
    if a.state is not State.PATCHED:
        raise VerifyFailed(
            f"{engine.target} is {render.state_line(a)}, not the output of patch {PATCH_ID}"
            + _next(a)
        )
    assert a.pin is not None
    if a.backup is not BackupState.PRESENT:
        raise VerifyFailed(
            f"{engine.target} is patched but its backup is {a.backup.value}, so revert could not "
            f"restore the pristine file (expected sha256 {a.pin.pristine_sha256}): "
            f"{a.corrupt_backup_first()}reinstall the engine ({reinstall_hint(engine)}), then run "
            f"`ple4patch apply {engine.venv}`"
        )
    stale = bytecode.unchecked_stale_pycache(engine.target)
    if stale:
        raise VerifyFailed(
            f"{engine.target} is patched, but {stale[0]} is an unchecked-hash pyc of other bytes: Python "
            f"would run it (the old code) instead of the file; run `ple4patch apply {engine.venv}` as a "
            f"user who can write in {stale[0].parent} to remove it"
        )
    return Result(
        "verify",
        EXIT_OK,
        f"ok: {engine.target} is the exact output of {PATCH_ID} for {a.pin.label} "
        f"(sha256 {a.current_sha256}); the backup restores the pristine file (sha256 {a.backup_sha256})",
        render.report(a),
    )

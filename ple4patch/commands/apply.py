"""`ple4patch apply`: patch the engine's target (idempotent), or show the diff (--dry-run).

The flow, top-down: find the engine -> assess the target under the venv lock -> plan
(transform in memory, output checked) -> write (`write.write_patch`) -> report. Nothing
reaches disk before the whole output is known good; a dry run takes no lock and writes
nothing.
"""

from __future__ import annotations

import os

from .. import manifest as manifest_mod
from .. import plan as planning
from .. import render, write
from ..engine import find_target, reinstall_hint
from ..errors import EXIT_OK
from ..manifest import Manifest
from ..paths import TARGET_REL
from ..plan import PatchSource, Plan
from ..result import Result
from ..sentinel import PATCH_ID
from ..state import Assessment, BackupState, State, assess


def run(
    venv: str | os.PathLike | None = None,
    *,
    dry_run: bool = False,
    allow_unknown: bool = False,
    manifest: Manifest | None = None,
    patch_source: PatchSource | None = None,
    lock_timeout: float | None = None,
) -> Result:
    engine = find_target(venv)
    base = manifest if manifest is not None else manifest_mod.load()

    def make_plan(a: Assessment, full: Manifest) -> Plan:  # the transform is resolved lazily:
        transform = patch_source or planning.default_patch_source()  # a patched file needs no libcst
        return planning.make_plan(a, full, allow_unknown=allow_unknown, dry_run=dry_run, patch_source=transform)

    if dry_run:  # no lock: nothing is written
        full = manifest_mod.with_local(base, engine.target)
        a = assess(engine, full)
        if a.state is State.MISSING:
            engine.require_target()
        if a.state is State.PATCHED:
            return _already_patched(a, [], dry_run=True)
        return _dry_run(a, make_plan(a, full))

    def nothing_to_write(a: Assessment) -> bool:
        return a.state is State.PATCHED and write.no_stale_bytecode(a)

    with write.locked_assessment(engine, base, lock_timeout, nothing_to_write) as (a, full, not_writable):
        if a.state is State.PATCHED:
            return _already_patched(a, [] if not_writable is not None else write.tidy_leftovers(engine.target))
        p = make_plan(a, full)
        return _patched(a, p, write.write_patch(a, p))


def _already_patched(a: Assessment, tidied: list[str], *, dry_run: bool = False) -> Result:
    msg = f"already patched ({a.patch_id}; {a.pin.label if a.pin else '-'}): nothing changed"
    if a.backup is not BackupState.PRESENT:
        msg += (
            f"; warning: the backup is {a.backup.value}, so `revert` cannot restore the pristine "
            f"file ({a.corrupt_backup_first()}reinstall the engine: {reinstall_hint(a.engine)}, then "
            f"`ple4patch apply {a.engine.venv}`)"
        )
    data = {**render.report(a), "changed": False, "notes": a.notes + list(tidied)}
    if dry_run:
        return Result("apply", EXIT_OK, "dry run: " + render.with_notes(msg, tidied),
                      {**data, "diff": "", "dry_run": True})
    return Result("apply", EXIT_OK, render.with_notes(msg, tidied), data)


def _dry_run(a: Assessment, p: Plan) -> Result:
    e = a.engine
    assert a.current_bytes is not None
    diff = render.unified_diff(a.current_bytes, p.output, TARGET_REL)
    if p.pin is None:
        msg = (
            f"dry run: nothing written. This file is NOT pinned (1cat-vllm {e.version} as shipped); "
            f"if the diff above looks right, apply it with `ple4patch apply --allow-unknown {e.venv}`"
        )
    else:
        msg = (
            f"dry run: nothing written; `ple4patch apply {e.venv}` would patch {p.pin.label} "
            f"(output sha256 {p.output_sha} matches the pin)"
        )
    return Result(
        "apply",
        EXIT_OK,
        msg,
        {**render.report(a), "dry_run": True, "changed": False, "diff": diff, "regions": render.diff_regions(diff),
         "output_sha256": p.output_sha},
        output=diff,
    )


def _patched(a: Assessment, p: Plan, written: write.Written) -> Result:
    assert written.pin is not None
    what = "upgraded from patch id " + str(a.patch_id) if p.from_backup else "patched"
    msg = f"{what}: {a.target} ({PATCH_ID}; {written.pin.label}); sha256 {p.output_sha}"
    data = {
        **render.report(a),
        "state_before": a.state.value,
        "state": State.PATCHED.value,
        "changed": True,
        "pin": written.pin.describe(),
        "output_sha256": p.output_sha,
        "backup": {"state": BackupState.PRESENT.value, "path": str(a.backup_path), "sha256": p.source_sha},
        "notes": a.notes + written.notes,
        "pycache_removed": [str(x) for x in written.pycache_removed],
    }
    return Result("apply", EXIT_OK, render.with_notes(msg, written.notes), data)

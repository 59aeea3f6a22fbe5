"""`ple4patch apply`: patch the engine's set of files (idempotent), or show the diff (--dry-run).

The flow, top-down: find the engine -> assess every file of the set under the venv lock ->
plan each file that is not patched yet (transform in memory, output checked; any refusal stops
here, nothing written) -> write (`write.write_set`: every backup, the journal, the replaces)
-> report. Nothing reaches disk before every output is known good; a dry run takes no lock
and writes nothing. The set is the PLE layer, plus the file from which the release places the
PLE table by itself: the start-up policy file, or before it ``vllm/config/vllm.py``
(`fileset.members`). A ``vllm/config/vllm.py`` outside the set (a cascade alone, or a file that
cannot be read) gets one note saying what `vllm serve` needs (`SetAssessment.placement_notes`).
"""

from __future__ import annotations

import os

from .. import manifest as manifest_mod
from .. import plan as planning
from .. import render, set_report, shell, write
from ..engine import find_target, reinstall_hint
from ..errors import EXIT_OK, ModifiedFile
from ..fileset import SetAssessment, assess_set
from ..manifest import Manifest
from ..paths import CONFIG_REL, POLICY_REL, rel_of
from ..plan import PatchSource, Plan
from ..result import Result
from ..sentinel import PATCH_ID
from ..state import Assessment, BackupState, State


def run(
    venv: str | os.PathLike | None = None,
    *,
    dry_run: bool = False,
    allow_unknown: bool = False,
    manifest: Manifest | None = None,
    patch_source: PatchSource | None = None,
    policy_patch_source: PatchSource | None = None,
    config_patch_source: PatchSource | None = None,
    lock_timeout: float | None = None,
) -> Result:
    engine = find_target(venv, command="apply")
    base = manifest if manifest is not None else manifest_mod.load()

    def transform_for(a: Assessment) -> PatchSource:  # resolved lazily: a patched set needs no libcst
        rel = rel_of(a.target)
        given = {POLICY_REL: policy_patch_source, CONFIG_REL: config_patch_source}.get(rel, patch_source)
        return given or planning.default_patch_source_for(rel)

    def make_plans(s: SetAssessment, full: Manifest) -> list[tuple[Assessment, Plan]]:
        return [
            (a, planning.make_plan(a, full.only(rel_of(a.target)), allow_unknown=allow_unknown,
                                   dry_run=dry_run, patch_source=transform_for(a)))
            for a in s.files if a.state is not State.PATCHED
        ]

    if dry_run:  # no lock: nothing is written
        full = write.with_local_pins(base, engine)
        s = assess_set(engine, full)
        if s.layer.state is State.MISSING:
            engine.require_target()
        _refuse_shadowed(s)
        if s.state == State.PATCHED.value:
            return _already_patched(s, [], dry_run=True)
        return _dry_run(s, make_plans(s, full))

    def nothing_to_write(s: SetAssessment) -> bool:
        return (s.state == State.PATCHED.value and s.journal is None and s.journal_problem is None
                and all(write.no_stale_bytecode(a) for a in s.files))

    with write.locked_set(engine, base, lock_timeout, nothing_to_write) as (s, full, not_writable):
        _refuse_shadowed(s)
        if s.state == State.PATCHED.value:
            tidied = [] if not_writable is not None else _finish_journal(s)
            if not_writable is None:
                for a in s.files:
                    tidied += write.tidy_leftovers(a.target)
            return _already_patched(s, tidied)
        plans = make_plans(s, full)  # every file planned (or refused) before anything is written
        tidied = _finish_journal(s)
        written = write.write_set(plans)
        after = assess_set(engine, write.with_local_pins(base, engine))  # what --json reports: the files now
        return _patched(s, after, plans, written, tidied)


def _refuse_shadowed(s: SetAssessment) -> None:
    """Python would import another module instead of a file of the set (a package or an
    extension module of its name beside it): patching the file would change nothing that runs."""
    for a in s.files:
        problem = a.shadow_problem()
        if problem:
            raise ModifiedFile(f"{problem}: nothing written")


def _finish_journal(s: SetAssessment) -> list[str]:
    """A journal left by a killed run: this run finishes the set (each file in its own state is
    safe, and this command brings every file to one state); the journal is removed."""
    from ..fileset import remove_journal

    if s.journal is None and s.journal_problem is None:
        return []
    what = f"an interrupted {s.journal.direction}" if s.journal is not None else "an unreadable journal"
    remove_journal(s.engine.site_packages)
    return [f"found {what} ({', '.join(s.rels)}); this apply brings the whole set to patched"]


def _already_patched(s: SetAssessment, tidied: list[str], *, dry_run: bool = False) -> Result:
    a = s.layer
    label = render.engine_label(a.engine.version, a.pin.shown_label if a.pin else None)
    msg = f"already patched ({label}): nothing changed"
    if len(s.files) > 1:
        msg = f"already patched ({label}; {len(s.files)} files): nothing changed"
    for f in s.files:
        if f.backup is not BackupState.PRESENT:
            msg += (
                f"\nwarning: the backup of {f.target} is {f.backup.value}, so `revert` cannot "
                f"restore the pristine file ({f.corrupt_backup_first()}reinstall the engine: "
                f"{reinstall_hint(f.engine)}, then `{shell.ple4patch('apply', f.engine.venv)}`)"
            )
    data = {**set_report.report(s), "changed": False}
    data["notes"] = data["notes"] + list(tidied)
    if dry_run:
        return Result("apply", EXIT_OK, "dry run: " + render.with_notes(msg, tidied + s.placement_notes),
                      {**data, "diff": "", "dry_run": True})
    return Result("apply", EXIT_OK, render.with_notes(msg, tidied + s.placement_notes), data)


def _dry_run(s: SetAssessment, plans: list[tuple[Assessment, Plan]]) -> Result:
    e = s.engine
    diff = ""
    for a, p in plans:
        assert a.current_bytes is not None
        diff += render.unified_diff(a.current_bytes, p.output, rel_of(a.target))
    unpinned = [a for a, p in plans if p.pin is None and not p.opted_in]
    if unpinned:
        names = "".join(f"\n  {a.target}" for a in unpinned)
        msg = (
            f"dry run: nothing written. NOT pinned: 1cat-vllm {e.version} as shipped:{names}\n"
            f"if the change looks right, patch it with: {shell.ple4patch('apply', '--allow-unknown', e.venv)}"
        )
    elif any(p.pin is None for _a, p in plans):
        names = "".join(f"\n  {a.target}" for a, p in plans if p.pin is None)
        msg = (
            f"dry run: nothing written. Not pinned by this ple4patch, but opted in by an earlier "
            f"`apply --allow-unknown` (a local pin of an older patch id):{names}\n"
            f"if the change looks right, upgrade it with: {shell.ple4patch('apply', e.venv)}"
        )
    else:
        labels = list(dict.fromkeys(p.pin.shown_label for _a, p in plans))  # type: ignore[union-attr]
        shas = ", ".join(p.output_sha for _a, p in plans)
        msg = (
            f"dry run: nothing written; output sha256 {shas} matches the pin\n"
            f"engine:  {render.engine_label(e.version, ' and '.join(labels), len(labels))}\n"
            f"next:    {shell.ple4patch('apply', e.venv)}"
        )
    msg = render.with_notes(msg, s.placement_notes)
    data = {**set_report.report(s), "dry_run": True, "changed": False, "diff": diff,
            "regions": render.diff_regions(diff), "output_sha256": plans[0][1].output_sha}
    for entry, a in zip(data["files"], s.files):
        entry["output_sha256"] = next((p.output_sha for fa, p in plans if fa is a), None)
    return Result("apply", EXIT_OK, msg, data, output=diff)


def _patched(s: SetAssessment, after: SetAssessment, plans: list[tuple[Assessment, Plan]],
             written: list[write.Written], tidied: list[str]) -> Result:
    lines = []
    for (a, p), w in zip(plans, written):
        assert w.pin is not None
        if p.from_backup:
            lines.append(f"upgraded: {a.target} ({a.patch_id} -> {PATCH_ID})")
        else:
            lines.append(f"patched: {a.target} ({PATCH_ID}, sha256 {p.output_sha})")
    notes = tidied + [n for w in written for n in w.notes]
    data = {**set_report.report_after(s, after), "changed": True}
    by_target = {a.target: (p, w) for (a, p), w in zip(plans, written)}
    hit = by_target.get(s.layer.target)
    if hit is not None:
        data["output_sha256"] = hit[0].output_sha
    data["pycache_removed"] = [str(x) for x in hit[1].pycache_removed] if hit is not None else []
    for entry, a in zip(data["files"], after.files):
        hit = by_target.get(a.target)
        entry["changed"] = hit is not None
        if hit is not None:
            entry["output_sha256"] = hit[0].output_sha
    data["notes"] = data["notes"] + notes
    pinned = plans[0][1].pin if plans else None
    lines.append(f"engine:  1cat-vllm {s.engine.version} in {s.engine.venv}"
                 + (f" (file pinned as {pinned.shown_label})" if pinned else ""))
    return Result("apply", EXIT_OK, render.with_notes("\n".join(lines), notes + s.placement_notes), data)

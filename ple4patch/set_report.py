"""What a set of files looks like to people and to --json: one entry per file, and the set.

Pure functions of a `fileset.SetAssessment`. Every command's --json keeps the layer's keys at the
top level (`render.report`) and adds ``files`` (one object per file of the set: ``path``
relative to site-packages, ``target``, ``state``, ``patch_id``, ``pin``, ``hashes``, ``backup``,
``notes``) and ``set`` (``files``: the paths, ``state``: the files' state when they agree, else
``mixed``, ``journal``: null or the interrupted run's ``path``, ``direction`` and ``files``,
``journal_problem``: null or why a journal file cannot be read).
"""

from __future__ import annotations

from . import render, shell
from .fileset import SetAssessment
from .state import Assessment, BackupState, State


def file_report(a: Assessment) -> dict:
    data = render.report(a)
    data.pop("engine", None)
    data.pop("current_patch_id", None)
    rel = a.target.relative_to(a.engine.site_packages).as_posix()
    return {"path": rel, "target": str(a.target), **data}


def set_data(s: SetAssessment) -> dict:
    return {
        "files": [file_report(a) for a in s.files],
        "set": {
            "files": s.rels,
            "state": s.state,
            "journal": s.journal.as_dict() if s.journal is not None else None,
            "journal_problem": s.journal_problem,
        },
    }


def report(s: SetAssessment) -> dict:
    """The layer's report (top level, as for one file), its notes with the set's, and the set."""
    data = render.report(s.layer)
    data["notes"] = s.notes + data["notes"] + [n for a in s.files[1:] for n in a.notes]
    return {**data, **set_data(s)}


def report_after(before: SetAssessment, after: SetAssessment) -> dict:
    """What a run that wrote files reports: the set as it is now (`after`, assessed once the
    writes are done: states, hashes, backups, patch ids), with each file's state before the run
    (``state_before``, at the top level for the layer). The notes are those of the set the run
    found (the run adds its own): the state after it would only restate them ("a stale backup
    was set aside earlier" beside the run's "set aside as ...")."""
    data = report(after)
    data["state_before"] = before.layer.state.value
    data["notes"] = report(before)["notes"]
    was = {b.target: b for b in before.files}
    for entry, a in zip(data["files"], after.files):
        b = was.get(a.target)
        entry["state_before"] = b.state.value if b is not None else None
        entry["notes"] = file_report(b)["notes"] if b is not None else entry["notes"]
    return data


def status_parts(s: SetAssessment) -> tuple[str, str]:
    """`ple4patch status` as (details, verdict). One file: its details, then its state, its
    notes and the set's, and its next step. A set: the layer's details and state, one block per
    other file, then the verdict: the set's line, its notes, the layer's next step and, when the
    set is mixed or interrupted, the set's. Paths are whole; text for people shortens them."""
    if len(s.files) == 1 and s.journal is None and s.journal_problem is None:
        verdict = render.status_verdict(s.layer)
        at = 1 + len(s.layer.notes)  # the set's notes after the layer's, before its next step
        verdict[at:at] = [f"note:    {n}" for n in s.notes]
        return "\n".join(render.status_body(s.layer)), "\n".join(verdict)
    body = render.status_body(s.layer) + render.status_verdict(s.layer, next_step=False)
    for a in s.files[1:]:
        h = a.hashes()
        body += [
            f"file:    {a.target}",
            f"state:   {render.state_line(a)}",
            f"sha256:  current         {h['current'] or '-'}",
            f"         RECORD          {h['record'] or '-'}",
            f"         pinned pristine {h['pinned_pristine'] or '-'}",
            f"         pinned patched  {h['pinned_patched'] or '-'}",
            f"backup:  {a.backup.value}" + (f" {a.backup_path} sha256 {a.backup_sha256}" if a.backup_sha256 else ""),
        ]
        body += [f"note:    {n}" for n in a.notes]
    verdict = [f"set:     {s.state} ({len(s.files)} files: {', '.join(s.rels)})"]
    verdict += [f"note:    {n}" for n in s.notes]
    step = next_step(s)
    if step:
        verdict.append(f"next:    {step}")
    return "\n".join(body), "\n".join(verdict)


def next_step(s: SetAssessment) -> str | None:
    """The set's one next step (`ple4patch status`'s `next:`): for a half-applied set the apply
    (or revert) that finishes it, else the step of the file to fix first (`first_to_fix`)."""
    first = first_to_fix(s)
    patched = {a.state in (State.PATCHED, State.PATCHED_OLDER) for a in s.files}
    if len(patched) > 1 and not _must_fix_first(first):
        # half applied (or reverted), a killed run's or a hand's: either command finishes it, and
        # that is the one next step (verify would fail until then)
        apply = (shell.ple4patch('apply', '--allow-unknown', s.engine.venv) if s.by_state(State.UNPINNED)
                 else shell.ple4patch('apply', s.engine.venv))
        return f"{apply}  (or revert): either makes the whole set one state"
    return render.file_next_step(first)


def _must_fix_first(a: Assessment) -> bool:
    """A file no apply or revert can finish until it is fixed (`first_to_fix`'s first kinds)."""
    return bool(a.symlink_fix or a.shadowed_by) or a.state is State.MODIFIED or (
        a.state in (State.PATCHED, State.PATCHED_OLDER) and a.backup is not BackupState.PRESENT)


def first_to_fix(s: SetAssessment) -> Assessment:
    """The file whose next step is the set's: one that must be fixed first (a symlink, a
    shadowing module, a modified file, a patched file without its backup), else an unpinned one (apply refuses the whole set until
    it is reviewed and opted in), else the layer."""
    for wanted in (lambda a: a.symlink_fix or a.shadowed_by, lambda a: a.state is State.MODIFIED,
                   lambda a: a.state in (State.PATCHED, State.PATCHED_OLDER) and a.backup is not BackupState.PRESENT,
                   lambda a: a.state is State.UNPINNED):
        found = next((a for a in s.files if wanted(a)), None)
        if found is not None:
            return found
    return s.layer


def status_text(s: SetAssessment) -> str:
    """`ple4patch status` as printed (`status_parts`, details then verdict)."""
    return "\n".join(status_parts(s))

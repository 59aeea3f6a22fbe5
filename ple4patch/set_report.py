"""What a set of files looks like to people and to --json: one entry per file, and the set.

Pure functions of a `fileset.SetAssessment`. Every command's --json keeps the layer's keys at the
top level (`render.report`) and adds ``files`` (one object per file of the set: ``path``
relative to site-packages, ``target``, ``state``, ``patch_id``, ``pin``, ``hashes``, ``backup``,
``notes``) and ``set`` (``files``: the paths, ``state``: the files' state when they agree, else
``mixed``, ``journal``: null or the interrupted run's ``path``, ``direction`` and ``files``,
``journal_problem``: null or why a journal file cannot be read).
"""

from __future__ import annotations

from . import render
from .fileset import SetAssessment
from .state import Assessment


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


def status_text(s: SetAssessment) -> str:
    """The layer's status text, then one block per other file of the set, then the set's line."""
    text = render.status_text(s.layer)
    if len(s.files) == 1 and s.journal is None and s.journal_problem is None:
        return text
    lines = [text]
    for a in s.files[1:]:
        h = a.hashes()
        lines += [
            f"file:    {a.target}",
            f"state:   {render.state_line(a)}",
            f"sha256:  current         {h['current'] or '-'}",
            f"         RECORD          {h['record'] or '-'}",
            f"         pinned pristine {h['pinned_pristine'] or '-'}",
            f"         pinned patched  {h['pinned_patched'] or '-'}",
            f"backup:  {a.backup.value}" + (f" {a.backup_path.name} sha256 {a.backup_sha256}" if a.backup_sha256 else ""),
        ]
        lines += [f"note:    {n}" for n in a.notes]
    lines.append(f"set:     {s.state} ({len(s.files)} files: {', '.join(s.rels)})")
    lines += [f"note:    {n}" for n in s.notes]
    if s.journal is not None or s.state == "mixed":
        lines.append(f"next:    ple4patch apply {s.engine.venv}  (or revert): either makes the whole set one state")
    return "\n".join(lines)

"""What an assessment looks like to people and to --json: status text, report data, diffs.

Pure functions of a `state.Assessment` (no reads, no writes): `report` is the JSON data
every command starts from, `status_text` the text of `ple4patch status`, `with_notes`
the verdict followed by its `note:` lines.
"""

from __future__ import annotations

import difflib

from .engine import reinstall_hint
from .sentinel import PATCH_ID
from .state import Assessment, BackupState, State

_STATE_TEXT = {
    State.PRISTINE: "pristine (pinned: {label})",
    State.PATCHED: "patched ({patch_id}; pinned: {label})",
    State.PATCHED_OLDER: "patched by an older patch id ({patch_id}); `apply` upgrades it",
    State.UNPINNED: "as shipped but unpinned (matches RECORD, not the manifest)",
    State.MODIFIED: "modified (matches neither RECORD nor the manifest)",
    State.MISSING: "missing",
}

_BACKUP_TEXT = {
    BackupState.ABSENT: "absent",
    BackupState.PRESENT: "present",
    BackupState.STALE: "stale (a pristine file of another engine version or build; never restored)",
    BackupState.CORRUPT: "corrupt (matches no known pristine file; never restored)",
}


def report(a: Assessment) -> dict:
    """The JSON data of an assessment (every command's --json starts from it)."""
    return {
        "engine": a.engine.as_dict(),
        "state": a.state.value,
        "patch_id": a.patch_id,
        "current_patch_id": PATCH_ID,
        "pin": a.pin.describe() if a.pin else None,
        "hashes": a.hashes(),
        "backup": {"state": a.backup.value, "path": str(a.backup_path), "sha256": a.backup_sha256},
        "notes": list(a.notes),
    }


def state_line(a: Assessment) -> str:
    return _STATE_TEXT[a.state].format(
        label=a.pin.label if a.pin else "-", patch_id=a.patch_id or "-"
    )


def _short(sha: str | None) -> str:
    return sha if sha else "-"


def _next_step(a: Assessment) -> str | None:
    """What to do next: every step named here does what it says in this state."""
    e = a.engine
    first = a.corrupt_backup_first()
    reinstall = f"reinstall the engine ({reinstall_hint(e)}), then `ple4patch apply {e.venv}`"
    if a.state is State.PATCHED and a.backup is not BackupState.PRESENT:
        return f"{first}{reinstall} (the backup is {a.backup.value}: revert cannot restore the pristine file)"
    if a.state is State.PATCHED_OLDER and a.backup is not BackupState.PRESENT:
        return f"{first}{reinstall}"
    step = {
        State.PRISTINE: f"ple4patch apply {e.venv}",
        State.PATCHED: f"ple4patch verify {e.venv}  (or revert)",
        State.PATCHED_OLDER: f"ple4patch apply {e.venv}",
        State.UNPINNED: f"review with `ple4patch apply --dry-run {e.venv}`, then "
        f"`ple4patch apply --allow-unknown {e.venv}`",
        State.MODIFIED: reinstall,
    }.get(a.state)
    return first + step if step else None


def status_text(a: Assessment) -> str:
    e = a.engine
    h = a.hashes()
    lines = [
        f"engine:  1cat-vllm {e.version} in {e.venv}",
        f"target:  {e.target}",
        f"state:   {state_line(a)}",
        f"sha256:  current         {_short(h['current'])}",
        f"         RECORD          {_short(h['record'])}",
        f"         pinned pristine {_short(h['pinned_pristine'])}",
        f"         pinned patched  {_short(h['pinned_patched'])}",
        f"backup:  {_BACKUP_TEXT[a.backup]}"
        + (f" {a.backup_path.name} sha256 {a.backup_sha256}" if a.backup_sha256 else ""),
    ]
    lines += [f"note:    {n}" for n in a.notes]
    nxt = _next_step(a)
    if nxt:
        lines.append(f"next:    {nxt}")
    return "\n".join(lines)


def with_notes(message: str, notes: list[str]) -> str:
    """The verdict, then one `note:` line per note."""
    return "\n".join([message] + [f"note: {n}" for n in notes])


def unified_diff(old: bytes, new: bytes, rel: str) -> str:
    a = old.decode("utf-8", errors="replace").splitlines(keepends=True)
    b = new.decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, fromfile=f"a/{rel}", tofile=f"b/{rel}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

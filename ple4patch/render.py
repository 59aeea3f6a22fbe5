"""What an assessment looks like to people and to --json: status text, report data, diffs.

Pure functions of a `state.Assessment` (no reads, no writes): `report` is the JSON data
every command starts from, `status_text` the text of `ple4patch status` (`status_body`, the
details, then `status_verdict`, the state and what to do next), `with_notes` the verdict
followed by its `note:` lines, `unified_diff` / `diff_regions` / `stat_text` a dry run's
diff and its summary. Text for people fits 100 columns: hashes are shown
short (`short_hashes`; `--verbose` and `--json` keep them whole) and labels lead with the
engine version installed (`engine_label`).
"""

from __future__ import annotations

import ast
import difflib
import re

from . import shell
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


SHORT_HASH = 12  # hex digits of a hash in text (git shows 7-12)
_FULL_HASH = re.compile(r"(?<![0-9a-f])([0-9a-f]{%d})[0-9a-f]{%d}(?![0-9a-f])" % (SHORT_HASH, 64 - SHORT_HASH))


def short_hashes(text: str) -> str:
    """Every full sha256 (64 hex digits) in `text` shortened to its first 12."""
    return _FULL_HASH.sub(r"\1", text)


def engine_label(version: str, pin_label: str | None, files: int = 1) -> str:
    """The engine as the user knows it, its version first: `1cat-vllm 1.5.1, file pinned as
    1Cat-vLLM main 036318a0` (`files pinned as` for the labels of several files)."""
    what = "file" if files == 1 else "files"
    return f"1cat-vllm {version}" + (f", {what} pinned as {pin_label}" if pin_label else "")


def state_line(a: Assessment) -> str:
    if a.state is State.MODIFIED and a.patch_id is not None:  # a sentinel without a known hash
        return f"modified: it {a.modified_why()}"
    if a.state is State.PATCHED_OLDER and a.backup is not BackupState.PRESENT:  # apply refuses it
        return f"patched by an older patch id ({a.patch_id}); its backup is {a.backup.value}, so `apply` cannot upgrade it"
    return _STATE_TEXT[a.state].format(
        label=a.pin.shown_label if a.pin else "-", patch_id=a.patch_id or "-"
    )


def _short(sha: str | None) -> str:
    return sha if sha else "-"


def file_next_step(a: Assessment) -> str | None:
    """What to do next about one file: every step named here does what it says in this state."""
    e = a.engine
    first = a.corrupt_backup_first()
    reinstall = f"reinstall the engine ({reinstall_hint(e)}), then `{shell.ple4patch('apply', e.venv)}`"
    if a.symlink_fix:  # apply refuses to write through a symlink: that comes first
        return a.symlink_fix
    if a.shadowed_by:  # Python imports another module: no other step helps first
        return a.shadow_fix()
    if a.state is State.PATCHED and a.backup is not BackupState.PRESENT:
        return f"{first}{reinstall} (the backup is {a.backup.value}: revert cannot restore the pristine file)"
    if a.state is State.PATCHED_OLDER and a.backup is not BackupState.PRESENT:
        return f"{first}{reinstall}"
    step = {
        State.PRISTINE: shell.ple4patch('apply', e.venv),
        State.PATCHED: f"{shell.ple4patch('verify', e.venv)}  (or revert)",
        State.PATCHED_OLDER: shell.ple4patch('apply', e.venv),
        State.UNPINNED: f"review with `{shell.ple4patch('apply', '--dry-run', e.venv)}`, then "
        f"`{shell.ple4patch('apply', '--allow-unknown', e.venv)}`",
        State.MODIFIED: a.modified_fix(),
    }.get(a.state)
    if step and a.backup is BackupState.STALE and a.state in (State.PRISTINE, State.UNPINNED):
        step += "  (it sets the stale backup aside, never restored)"
    return first + step if step else None


def status_body(a: Assessment) -> list[str]:
    """The details of one file's status: engine, target, hashes, backup. Paths are whole here;
    text for people names them relative to site-packages unless --verbose."""
    e = a.engine
    h = a.hashes()
    return [
        f"engine:  1cat-vllm {e.version} in {e.venv}",
        f"target:  {e.target}",
        f"sha256:  current         {_short(h['current'])}",
        f"         RECORD          {_short(h['record'])}",
        f"         pinned pristine {_short(h['pinned_pristine'])}",
        f"         pinned patched  {_short(h['pinned_patched'])}",
        f"backup:  {_BACKUP_TEXT[a.backup]}"
        + (f" {a.backup_path} sha256 {a.backup_sha256}" if a.backup_sha256 else ""),
    ]


def status_verdict(a: Assessment, *, next_step: bool = True) -> list[str]:
    """One file's verdict: its state, its notes and (`next_step`) what to do next."""
    lines = [f"state:   {state_line(a)}"] + [f"note:    {n}" for n in a.notes]
    nxt = file_next_step(a) if next_step else None
    if nxt:
        lines.append(f"next:    {nxt}")
    return lines


def status_text(a: Assessment) -> str:
    """`ple4patch status` for one file: the details, then the verdict."""
    return "\n".join(status_body(a) + status_verdict(a))


def with_notes(message: str, notes: list[str]) -> str:
    """The verdict, then one `note:` line per note."""
    return "\n".join([message] + [f"note: {n}" for n in notes])


# -- a dry run's diff and its summary ------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
MODULE_SCOPE = "module level"


def _scopes(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, dotted name) of every class and def in `text` (1-based lines);
    none when the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                out.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def scope_at(scopes: list[tuple[int, int, str]], index: int) -> str:
    """The dotted name of the innermost class/def that holds line `index` (0-based), as
    `Qwen4ExpNGramEmbedding.load_weights`; MODULE_SCOPE outside every one."""
    line = index + 1
    inside = [s for s in scopes if s[0] <= line <= s[1]]
    return max(inside, key=lambda s: s[0])[2] if inside else MODULE_SCOPE


def unified_diff(old: bytes, new: bytes, rel: str, context: int = 3) -> str:
    """The unified diff of `old` -> `new`, as `diff -u`/difflib write it; each hunk header
    also names the class/def the hunk's first change is in (as git does), e.g.
    `@@ -120,6 +120,9 @@ Qwen4ExpNGramEmbedding.__init__`."""
    old_text, new_text = old.decode("utf-8", errors="replace"), new.decode("utf-8", errors="replace")
    a, b = old_text.splitlines(keepends=True), new_text.splitlines(keepends=True)
    old_scopes, new_scopes = _scopes(old_text), _scopes(new_text)
    out = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(context):
        if not out:
            out += [f"--- a/{rel}\n", f"+++ b/{rel}\n"]
        first = next(op for op in group if op[0] != "equal")
        scope = scope_at(new_scopes, first[3]) if first[0] != "delete" else scope_at(old_scopes, first[1])
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@ {scope}\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out += [" " + line for line in a[x1:x2]]
                continue
            if tag in ("replace", "delete"):
                out += ["-" + line for line in a[x1:x2]]
            if tag in ("replace", "insert"):
                out += ["+" + line for line in b[y1:y2]]
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _range(start: int, stop: int) -> str:  # difflib's _format_range_unified
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def diff_regions(diff: str) -> list[dict]:
    """One entry per hunk of a unified diff: where (old/new start and lines), the class/def
    it changes (`scope`, from the hunk header), lines added and removed, and the comment its
    added lines open with, blank lines aside (`comment`, or None): what an injected block
    says it is."""
    regions: list[dict] = []
    rel = None
    old_left = new_left = 0  # lines of the current hunk still to come (its header's counts)
    for line in diff.splitlines():
        if old_left <= 0 and new_left <= 0:  # between hunks: file headers, a hunk header
            if line.startswith("+++ "):
                rel = line[4:].split("\t")[0].removeprefix("b/")
                continue
            m = _HUNK.match(line)
            if m:
                regions.append({
                    "file": rel,
                    "scope": m.group(5) or MODULE_SCOPE,
                    "old_start": int(m.group(1)), "old_lines": int(m.group(2) or 1),
                    "new_start": int(m.group(3)), "new_lines": int(m.group(4) or 1),
                    "added": 0, "removed": 0, "comment": None,
                })
                old_left, new_left = regions[-1]["old_lines"], regions[-1]["new_lines"]
            continue
        if line.startswith("\\"):  # "\ No newline at end of file"
            continue
        if line.startswith("+"):
            new_left -= 1
        elif line.startswith("-"):
            old_left -= 1
        else:
            old_left -= 1
            new_left -= 1
        if line.startswith("+"):
            regions[-1]["added"] += 1
            r = regions[-1]
            if r["comment"] is None and not r.get("_code") and line[1:].lstrip().startswith("#"):
                r["comment"] = line[1:].strip().lstrip("#").strip()
            elif line[1:].strip():
                r["_code"] = True  # the added lines opened with code: no comment names them
        elif line.startswith("-"):
            regions[-1]["removed"] += 1
    for r in regions:
        r.pop("_code", None)
    return regions


def _region_name(region: dict) -> str:
    if region["scope"] == MODULE_SCOPE and region.get("comment"):
        return "# " + region["comment"]
    return region["scope"]


def stat_text(regions: list[dict]) -> str:
    """The summary of a dry run: per file, its +/- and one line per changed region."""
    if not regions:
        return "no region changes"
    names = [_region_name(r) for r in regions]
    width = min(max(len(n) for n in names), 64)
    lines: list[str] = []
    files = list(dict.fromkeys(r["file"] for r in regions))
    for rel in files:
        mine = [(r, n) for r, n in zip(regions, names) if r["file"] == rel]
        added, removed = sum(r["added"] for r, _ in mine), sum(r["removed"] for r, _ in mine)
        lines.append(f"{rel}: {len(mine)} region(s) change, +{added} -{removed}")
        for r, name in mine:
            name = name if len(name) <= width else name[: width - 3] + "..."
            lines.append(f"  line {r['old_start']:>5}  {name:<{width}}  +{r['added']} -{r['removed']}")
    return "\n".join(lines)

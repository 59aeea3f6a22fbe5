"""The actions behind the CLI: apply, status, verify, revert.

Each takes the venv (None: `$VIRTUAL_ENV`, else this interpreter's prefix) and
an optional `Manifest` (None: the shipped pins plus `$PLE4PATCH_EXTRA_MANIFESTS`;
the venv's local pins are always added), and returns a `Result`, or raises a
`Ple4Error` whose `exit_code` the CLI exits with.

Flow of one apply: engine -> state (under the lock) -> transform (in memory) ->
check the output (compiles, sentinel, hash pin) -> fsio writes. Nothing reaches
disk before the whole output is known good.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from . import fsio
from . import manifest as manifest_mod
from .engine import TARGET_REL, Engine, find_engine, sha256_hex
from .errors import (
    EXIT_ENGINE_NOT_FOUND,
    EXIT_OK,
    EngineNotFound,
    ModifiedFile,
    NotWritable,
    Ple4Error,
    TransformError,
    UnpinnedFile,
    VerifyFailed,
)
from .manifest import Manifest, Pin
from .sentinel import PATCH_ID, find_patch_id, sentinel_line
from .state import (
    Assessment,
    BackupState,
    State,
    assess,
    classify,
    set_aside_backups,
    temp_leftovers,
)

JSON_SCHEMA_VERSION = 1

PatchSource = Callable[[str], str]


@dataclass
class Result:
    """What an action did: text for people, data for --json, and the exit code."""

    command: str
    exit_code: int
    message: str
    data: dict = field(default_factory=dict)
    output: str = ""  # extra text printed before the message (dry-run's diff)

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    def to_json(self) -> dict:
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "command": self.command,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "message": self.message,
            **self.data,
        }


def error_object(err: Ple4Error) -> dict:
    """The ``error`` member of every command's JSON: kind, message and (engine) reason."""
    error = {"kind": err.kind, "message": str(err)}
    reason = getattr(err, "reason", None)
    if reason:
        error["reason"] = reason
    return error


def error_json(command: str, err: Ple4Error) -> dict:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": command,
        "ok": False,
        "exit_code": err.exit_code,
        "error": error_object(err),
    }


# -- helpers ------------------------------------------------------------------


def _manifest_for(engine: Engine, manifest: Manifest | None) -> Manifest:
    base = manifest if manifest is not None else manifest_mod.load()
    return manifest_mod.with_local(base, engine.target)


def _default_patch_source() -> PatchSource:
    from .transform import patch_source  # libcst: imported only by apply

    return patch_source


def _reinstall_hint(engine: Engine) -> str:
    return f"pip install --force-reinstall --no-deps '1cat-vllm=={engine.version}'"


def _report(a: Assessment) -> dict:
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


def _state_line(a: Assessment) -> str:
    return _STATE_TEXT[a.state].format(
        label=a.pin.label if a.pin else "-", patch_id=a.patch_id or "-"
    )


def _short(sha: str | None) -> str:
    return sha if sha else "-"


def _status_text(a: Assessment) -> str:
    e = a.engine
    h = a.hashes()
    lines = [
        f"engine:  1cat-vllm {e.version} in {e.venv}",
        f"target:  {e.target}",
        f"state:   {_state_line(a)}",
        f"sha256:  current         {_short(h['current'])}",
        f"         RECORD          {_short(h['record'])}",
        f"         pinned pristine {_short(h['pinned_pristine'])}",
        f"         pinned patched  {_short(h['pinned_patched'])}",
        f"backup:  {_BACKUP_TEXT[a.backup]}"
        + (f" {a.backup_path.name} sha256 {a.backup_sha256}" if a.backup_sha256 else ""),
    ]
    lines += [f"note:    {n}" for n in a.notes]
    nxt = {
        State.PRISTINE: f"next:    ple4patch apply {e.venv}",
        State.PATCHED: f"next:    ple4patch verify {e.venv}  (or revert)",
        State.PATCHED_OLDER: f"next:    ple4patch apply {e.venv}",
        State.UNPINNED: f"next:    review with `ple4patch apply --dry-run {e.venv}`, then "
        f"`ple4patch apply --allow-unknown {e.venv}`",
        State.MODIFIED: f"next:    reinstall the engine ({_reinstall_hint(e)}), then apply",
    }.get(a.state)
    if a.backup is BackupState.CORRUPT and a.state in (State.PRISTINE, State.UNPINNED):
        nxt = f"next:    move {a.backup_path.name} away (apply will not touch it), then apply"
    if nxt:
        lines.append(nxt)
    return "\n".join(lines)


# -- status -------------------------------------------------------------------


def status(venv: str | os.PathLike | None = None, *, manifest: Manifest | None = None) -> Result:
    """Report the state; exit 0 when the target exists, 3 when no engine/target."""
    try:
        engine = find_engine(venv)
    except EngineNotFound as err:
        return Result(
            "status",
            EXIT_ENGINE_NOT_FOUND,
            f"state:   not installed: {err}",
            {"state": State.NOT_INSTALLED.value, "reason": getattr(err, "reason", None), "error": error_object(err)},
        )
    a = assess(engine, _manifest_for(engine, manifest))
    if a.state is State.MISSING:
        try:
            engine.require_target()
        except EngineNotFound as err:
            return Result(
                "status",
                EXIT_ENGINE_NOT_FOUND,
                _status_text(a) + f"\nerror:   {err}",
                {**_report(a), "reason": "target_missing", "error": error_object(err)},
            )
    return Result("status", EXIT_OK, _status_text(a), _report(a))


# -- apply --------------------------------------------------------------------


@dataclass
class _Plan:
    source: bytes  # the pristine bytes the output is made from
    source_sha: str
    pin: Pin | None  # None: unpinned, applied with --allow-unknown
    output: bytes
    output_sha: str
    from_backup: bool  # upgrading an older patch: the source is the backup


def _source_for(a: Assessment, manifest: Manifest) -> tuple[bytes, Pin | None, bool]:
    """The pristine bytes to patch, their pin, and whether they come from the backup."""
    e = a.engine
    if a.state is State.PRISTINE:
        assert a.current_bytes is not None
        return a.current_bytes, a.pin, False
    if a.state is State.UNPINNED:
        assert a.current_bytes is not None
        return a.current_bytes, None, False
    if a.state is State.PATCHED_OLDER:
        if a.backup is not BackupState.PRESENT:
            raise ModifiedFile(
                f"{e.target} is patched by an older patch id ({a.patch_id}) and its backup is "
                f"{a.backup.value}, so its pristine bytes are unknown: reinstall the engine "
                f"({_reinstall_hint(e)}), then run `ple4patch apply {e.venv}` again"
            )
        data = a.backup_path.read_bytes()
        source = classify(sha256_hex(data), None, e.record_sha256, manifest)
        return data, source.pin, True
    if a.state is State.MODIFIED:
        if a.patch_id == PATCH_ID:
            raise ModifiedFile(
                f"{e.target} carries the ple4patch sentinel ({a.patch_id}) but is not a known patched "
                f"output (edited after patching, or its pins are gone): reinstall the engine "
                f"({_reinstall_hint(e)}), then apply"
            )
        raise ModifiedFile(
            f"{e.target} matches neither the engine's RECORD nor a pinned file (modified or foreign): "
            f"nothing written; reinstall the engine ({_reinstall_hint(e)}), then apply"
        )
    raise AssertionError(a.state)  # PATCHED, MISSING are handled by the caller


def build_output(source_text: str, path: str, pin: Pin | None, patch_source: PatchSource) -> bytes:
    """Run the transform and check its output (sentinel, compiles, hash pin): the bytes to write."""
    try:
        out = patch_source(source_text)
    except TransformError as err:
        raise ModifiedFile(
            f"the patch does not fit {path}: {err}; nothing written (this engine file has a "
            f"shape ple4patch does not know)"
        ) from None
    if not isinstance(out, str):
        raise Ple4Error(f"the transform returned {type(out).__name__}, not text; nothing written")
    if out.count(sentinel_line()) != 1 or find_patch_id(out) != PATCH_ID:
        raise Ple4Error(
            f"the transform output for {path} does not carry the sentinel {sentinel_line()!r} "
            f"exactly once; nothing written"
        )
    try:
        compile(out, path, "exec")
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise Ple4Error(
            f"the transform output for {path} does not compile{where}: {exc}; nothing written"
        ) from None
    data = out.encode("utf-8")
    if pin is not None:
        sha = sha256_hex(data)
        if pin.patch_id != PATCH_ID or pin.patched_sha256 != sha:
            raise Ple4Error(
                f"the transform output for {path} ({pin.label}) has sha256 {sha[:16]}… but the "
                f"manifest pins {pin.patch_id} {pin.patched_sha256[:16]}… (this build is "
                f"{PATCH_ID}): nothing written; this ple4patch build is inconsistent "
                f"(developers: `make pin`)"
            )
    return data


def _plan(a: Assessment, manifest: Manifest, allow_unknown: bool, dry_run: bool,
          patch_source: PatchSource) -> _Plan:
    e = a.engine
    source, pin, from_backup = _source_for(a, manifest)
    if pin is None and not (allow_unknown or dry_run):
        raise UnpinnedFile(
            f"{e.target} is as shipped with 1cat-vllm {e.version} (matches its RECORD) but no "
            f"manifest pins it: review the change with `ple4patch apply --dry-run {e.venv}`, then "
            f"opt in with `ple4patch apply --allow-unknown {e.venv}`"
        )
    if a.backup is BackupState.CORRUPT and not from_backup:
        # Not a backup ple4patch made of any known file: it may be somebody's own file, so it is
        # neither moved nor overwritten. (A stale backup of a known file is set aside instead.)
        what = f"sha256 {a.backup_sha256[:12]}" if a.backup_sha256 else "not a readable regular file"
        raise ModifiedFile(
            f"{a.backup_path} is in the way of the backup ({what}; not made by ple4patch from any "
            f"known file): nothing written. Move it away, then run `ple4patch apply {e.venv}` again"
        )
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        raise ModifiedFile(f"{e.target} is not UTF-8 text: nothing written") from None
    output = build_output(text, str(e.target), pin, patch_source)
    return _Plan(source, sha256_hex(source), pin, output, sha256_hex(output), from_backup)


def _unified_diff(old: bytes, new: bytes, rel: str) -> str:
    a = old.decode("utf-8", errors="replace").splitlines(keepends=True)
    b = new.decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, fromfile=f"a/{rel}", tofile=f"b/{rel}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


@contextlib.contextmanager
def _locked_assessment(
    engine: Engine,
    base: Manifest,
    lock_timeout: float | None,
    nothing_to_write: Callable[[Assessment], bool],
) -> Iterator[tuple[Assessment, Manifest, NotWritable | None]]:
    """Hold the venv lock and yield the target's state read afresh under it (local pins too).

    When the venv cannot be written (read-only file system, no permission) and
    `nothing_to_write(state)` says the command has nothing to write, there is no error: it
    yields the state read without the lock and the NotWritable (None when locked), and the
    command must then write nothing. A command with nothing to do needs no write access.
    """
    with contextlib.ExitStack() as stack:
        not_writable: NotWritable | None = None
        try:
            fsio.check_writable(engine.state_dir)
            fsio.check_writable(engine.target_dir)
            fsio.refuse_symlink(engine.target)
            stack.enter_context(fsio.locked(engine.state_dir, lock_timeout))
        except NotWritable as err:  # e.g. a read-only image patched when it was built
            not_writable = err
        full = manifest_mod.with_local(base, engine.target)
        a = assess(engine, full)
        if not_writable is not None and not nothing_to_write(a):
            raise not_writable
        if a.state is State.MISSING:
            engine.require_target()
        yield a, full, not_writable


def _no_stale_bytecode(a: Assessment) -> bool:
    """No pyc the interpreter would run unchecked instead of the target's current bytes (a stale
    timestamp pyc, e.g. after an image layer changed mtimes, is only recompiled: no need to write)."""
    return not fsio.unchecked_stale_pycache(a.target)


def apply(
    venv: str | os.PathLike | None = None,
    *,
    dry_run: bool = False,
    allow_unknown: bool = False,
    manifest: Manifest | None = None,
    patch_source: PatchSource | None = None,
    lock_timeout: float | None = None,
) -> Result:
    engine = find_engine(venv)
    engine.require_target()
    base = manifest if manifest is not None else manifest_mod.load()
    transform = patch_source  # resolved lazily: a patched file needs no libcst

    def get_transform() -> PatchSource:
        return transform or _default_patch_source()

    if dry_run:  # no lock: nothing is written
        full = manifest_mod.with_local(base, engine.target)
        return _apply_dry_run(assess(engine, full), full, allow_unknown, get_transform)

    def nothing_to_write(a: Assessment) -> bool:
        return a.state is State.PATCHED and _no_stale_bytecode(a)

    with _locked_assessment(engine, base, lock_timeout, nothing_to_write) as (a, full, not_writable):
        if a.state is State.PATCHED:
            return _already_patched(a, [] if not_writable is not None else _tidy_leftovers(engine.target))
        plan = _plan(a, full, allow_unknown, False, get_transform())
        return _write_apply(a, plan)


def _tidy_leftovers(target: Path) -> list[str]:
    """What a killed run can leave when this run has nothing to write: temp files, and
    bytecode of the old bytes (killed between the replace and the bytecode clean-up)."""
    notes = [f"removed a temp file left by an interrupted run: {p.name}"
             for p in fsio.remove_temp_leftovers(temp_leftovers(target))]
    removed = fsio.clean_stale_pycache(target)
    if removed:
        notes.append(f"removed {len(removed)} stale bytecode file(s) left by an interrupted run")
    return notes + _tidy_legacy(target)


def _tidy_legacy(target: Path) -> list[str]:
    """Development builds kept the lock and the local pins beside the target, where they kept
    a stray `vllm` directory alive after `pip uninstall`: move the pins to the root of
    site-packages and remove both (under the lock, after this run's own writes)."""
    notes = []
    old_pins = manifest_mod.legacy_local_pins_path(target)
    try:
        if manifest_mod.legacy_local_pins_readable(target):
            new_pins = manifest_mod.local_pins_path(target)
            data = manifest_mod.load_local(target).dumps().encode()
            if _bytes_or_none(new_pins) != data:
                fsio.atomic_write(new_pins, data, mode=0o644)
            fsio.remove(old_pins)
            notes.append(f"moved the local pins from {old_pins.name} beside the target to {new_pins}")
        if fsio.remove(target.parent / fsio.LOCK_NAME):
            notes.append(f"removed the lock file an older ple4patch kept beside the target ({fsio.LOCK_NAME})")
    except NotWritable as err:
        notes.append(f"could not tidy files an older ple4patch kept beside the target: {err}")
    return notes


def _bytes_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _already_patched(a: Assessment, tidied: list[str] = ()) -> Result:
    msg = f"already patched ({a.patch_id}; {a.pin.label if a.pin else '-'}): nothing changed"
    if a.backup is not BackupState.PRESENT:
        msg += (
            f"; warning: the backup is {a.backup.value}, so `revert` cannot restore the pristine "
            f"file (reinstall the engine instead: {_reinstall_hint(a.engine)})"
        )
    msg = "\n".join([msg] + [f"note: {n}" for n in tidied])
    return Result("apply", EXIT_OK, msg, {**_report(a), "changed": False, "notes": a.notes + list(tidied)})


def _apply_dry_run(a: Assessment, manifest: Manifest, allow_unknown: bool,
                   get_transform: Callable[[], PatchSource]) -> Result:
    e = a.engine
    if a.state is State.MISSING:
        e.require_target()
    if a.state is State.PATCHED:
        r = _already_patched(a)
        r.message = "dry run: " + r.message
        r.data["diff"] = ""
        r.data["dry_run"] = True
        return r
    plan = _plan(a, manifest, allow_unknown, True, get_transform())
    assert a.current_bytes is not None
    diff = _unified_diff(a.current_bytes, plan.output, TARGET_REL)
    if plan.pin is None:
        msg = (
            f"dry run: nothing written. This file is NOT pinned (1cat-vllm {e.version} as shipped); "
            f"if the diff above looks right, apply it with `ple4patch apply --allow-unknown {e.venv}`"
        )
    else:
        msg = (
            f"dry run: nothing written; `ple4patch apply {e.venv}` would patch {plan.pin.label} "
            f"(output sha256 {plan.output_sha} matches the pin)"
        )
    return Result(
        "apply",
        EXIT_OK,
        msg,
        {**_report(a), "dry_run": True, "changed": False, "diff": diff, "output_sha256": plan.output_sha},
        output=diff,
    )


def _write_apply(a: Assessment, plan: _Plan) -> Result:
    e = a.engine
    target = e.target
    notes: list[str] = []
    for p in fsio.remove_temp_leftovers(temp_leftovers(target)):
        notes.append(f"removed a temp file left by an interrupted run: {p.name}")
    bak = a.backup_path
    undo = _ApplyUndo(target, bak, plan.source_sha)
    try:
        if not plan.from_backup and a.backup is BackupState.STALE:
            undo.aside = fsio.stale_name(bak, a.backup_sha256)
            fsio.set_aside(bak, a.backup_sha256, dest=undo.aside)
            notes.append(
                f"the old backup was stale (a pristine file of another version, not made from this "
                f"file); set aside as {undo.aside.name}, it will never be restored "
                f"(`ple4patch revert --clean` removes it)"
            )
        if not plan.from_backup:
            undo.backup_was_absent = not (bak.exists() or bak.is_symlink())
            if fsio.write_backup(bak, plan.source, like=target):
                notes.append(f"backup written: {bak.name}")
        fsio.fault("after-backup")
        pin = plan.pin
        if pin is None:
            pin = manifest_mod.local_pin(
                pristine=plan.source_sha,
                patched=plan.output_sha,
                patch_id=PATCH_ID,
                version=e.version,
                size=len(plan.source),
            )
            pins = manifest_mod.local_pins_path(target)
            data = manifest_mod.add_local_pin(manifest_mod.load_local(target), pin).dumps().encode()
            before = _bytes_or_none(pins)
            if before != data:
                undo.pins = pins
                if before is not None:  # the old bytes stay under a temp name until the patch lands
                    undo.pins_kept = fsio.keep_aside(pins)
                fsio.atomic_write(pins, data, mode=0o644)
                notes.append(f"recorded a local pin in {pins}")
            else:
                notes.append(f"the local pin in {pins} stands (recorded by an earlier run)")
            fsio.fault("after-pins")
        hardlinked = os.stat(target).st_nlink > 1
        fsio.atomic_write(target, plan.output, like=target, fault_temp=True)
    except BaseException:  # not writable, disk full, Ctrl-C: the venv goes back to how it was
        undo.run()
        raise
    if undo.pins_kept is not None:
        with contextlib.suppress(Ple4Error):  # a leftover is a temp file: the next run removes it
            fsio.remove(undo.pins_kept)
    if hardlinked:
        notes.append("the target was hard-linked: it now has a new inode, the other links keep the old bytes")
    fsio.fault("after-replace")
    removed = fsio.clean_pycache(target)
    fsio.fault("after-pycache")
    if removed:
        notes.append(f"removed {len(removed)} stale bytecode file(s)")
    notes += _tidy_legacy(target)
    what = "upgraded from patch id " + str(a.patch_id) if plan.from_backup else "patched"
    msg = f"{what}: {target} ({PATCH_ID}; {pin.label}); sha256 {plan.output_sha}"
    data = {
        **_report(a),
        "state_before": a.state.value,
        "state": State.PATCHED.value,
        "changed": True,
        "pin": pin.describe(),
        "output_sha256": plan.output_sha,
        "backup": {"state": BackupState.PRESENT.value, "path": str(bak), "sha256": plan.source_sha},
        "notes": a.notes + notes,
        "pycache_removed": [str(p) for p in removed],
    }
    return Result("apply", EXIT_OK, "\n".join([msg] + [f"note: {n}" for n in notes]), data)


@dataclass
class _ApplyUndo:
    """What a failed apply takes back, so that the venv is exactly as before it: the backup it
    wrote, the stale backup it set aside (renamed back), the local pin it added (the old pins
    file renamed back). Renames and unlinks only: they work on a full disk. Only while the
    target still holds its old bytes: once the patch has landed, its result stays."""

    target: Path
    backup: Path
    source_sha: str
    aside: Path | None = None  # where this run set the old backup aside
    backup_was_absent: bool = False  # the backup path was free when this run wrote its backup
    pins: Path | None = None  # the local pins file this run wrote
    pins_kept: Path | None = None  # its earlier bytes, under a temp name (None: there was none)

    def run(self) -> None:
        if _sha_or_none(self.target) != self.source_sha:
            return
        steps = []
        if self.backup_was_absent:
            steps.append(lambda: fsio.remove(self.backup))
        if self.aside is not None:
            steps.append(self._unset_aside)
        if self.pins is not None:
            steps.append(self._restore_pins)
        for step in steps:  # best effort, each on its own: a failure must not hide the first error
            with contextlib.suppress(Ple4Error, OSError):
                step()

    def _unset_aside(self) -> None:
        assert self.aside is not None
        if _lexists(self.aside) and not _lexists(self.backup):
            os.rename(self.aside, self.backup)
            fsio.fsync_dir(self.backup.parent)

    def _restore_pins(self) -> None:
        assert self.pins is not None
        if self.pins_kept is None:
            fsio.remove(self.pins)
        elif _lexists(self.pins_kept):
            if _lexists(self.pins) and os.path.samestat(os.lstat(self.pins), os.lstat(self.pins_kept)):
                fsio.remove(self.pins_kept)  # never replaced (and rename() between links is a no-op)
            else:
                os.replace(self.pins_kept, self.pins)
                fsio.fsync_dir(self.pins.parent)


def _lexists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _sha_or_none(path: Path) -> str | None:
    try:
        return sha256_hex(path.read_bytes())
    except OSError:
        return None


# -- verify -------------------------------------------------------------------


def verify(venv: str | os.PathLike | None = None, *, manifest: Manifest | None = None) -> Result:
    """Exit 0 only if the target is exactly the expected patched output and the
    backup holds the pristine bytes it was made from."""
    engine = find_engine(venv)
    engine.require_target()
    a = assess(engine, _manifest_for(engine, manifest))
    data = _report(a)
    if a.state is State.MISSING:
        engine.require_target()
    if a.state is not State.PATCHED:
        raise VerifyFailed(
            f"{engine.target} is {_state_line(a)}, not the output of patch {PATCH_ID}"
            + (f": run `ple4patch apply {engine.venv}`" if a.state in (State.PRISTINE, State.PATCHED_OLDER) else "")
        )
    assert a.pin is not None
    if a.backup is not BackupState.PRESENT:
        raise VerifyFailed(
            f"{engine.target} is patched but its backup is {a.backup.value}, so revert could not "
            f"restore the pristine file (expected sha256 {a.pin.pristine_sha256})"
        )
    return Result(
        "verify",
        EXIT_OK,
        f"ok: {engine.target} is the exact output of {PATCH_ID} for {a.pin.label} "
        f"(sha256 {a.current_sha256}); the backup restores the pristine file (sha256 {a.backup_sha256})",
        data,
    )


# -- revert -------------------------------------------------------------------


def _is_patched_output_of(backup: bytes, current: bytes) -> bool:
    """Last resort when no pin links them: does the transform turn `backup` into `current`?"""
    try:
        text = backup.decode("utf-8")
        return _default_patch_source()(text).encode("utf-8") == current
    except (UnicodeDecodeError, TransformError, ImportError):
        return False


def revert(
    venv: str | os.PathLike | None = None,
    *,
    clean: bool = False,
    manifest: Manifest | None = None,
    lock_timeout: float | None = None,
) -> Result:
    engine = find_engine(venv)
    engine.require_target()
    base = manifest if manifest is not None else manifest_mod.load()

    def nothing_to_write(a: Assessment) -> bool:  # pristine; and --clean has nothing to remove
        if a.state not in (State.PRISTINE, State.UNPINNED) or not _no_stale_bytecode(a):
            return False
        return not (clean and (a.backup in (BackupState.STALE, BackupState.CORRUPT)
                               or set_aside_backups(engine.target)))

    with _locked_assessment(engine, base, lock_timeout, nothing_to_write) as (a, full, not_writable):
        notes: list[str] = []
        if not_writable is not None:  # read-only, and nothing to revert: write nothing at all
            return _nothing_to_revert(a, clean, notes, not_writable)
        for p in fsio.remove_temp_leftovers(temp_leftovers(engine.target)):
            notes.append(f"removed a temp file left by an interrupted run: {p.name}")
        restorable = a.state in (State.PATCHED, State.PATCHED_OLDER) and a.backup is BackupState.PRESENT
        if (
            not restorable
            and a.state is State.MODIFIED
            and a.patch_id is not None
            and a.backup is not BackupState.ABSENT
            and a.current_bytes is not None
            and a.backup_sha256 is not None
        ):
            restorable = _is_patched_output_of(a.backup_path.read_bytes(), a.current_bytes)
            if restorable:
                notes.append("no pin links the files; the transform confirmed the target is the backup's patched output")
        if restorable:
            return _restore(a, full, clean, notes)
        if a.state in (State.PATCHED, State.PATCHED_OLDER, State.MODIFIED):
            why = (
                f"its backup is {a.backup.value}"
                if a.state is not State.MODIFIED
                else "it is not the patched output of the backup (modified or foreign)"
            )
            raise ModifiedFile(
                f"cannot revert {engine.target}: {why}; nothing written. Restore the engine with "
                f"{_reinstall_hint(engine)}"
            )
        return _nothing_to_revert(a, clean, notes, None)


def _nothing_to_revert(a: Assessment, clean: bool, notes: list[str], not_writable: NotWritable | None) -> Result:
    """Pristine or as shipped: nothing to restore. Tidies leftovers when the venv is writable
    (`not_writable` is None); otherwise writes nothing and says so."""
    engine = a.engine
    msg = f"nothing to revert: {engine.target} is {_state_line(a)}; nothing to do"
    if not_writable is not None:
        notes.append(f"the venv is not writable ({not_writable}); nothing was needed, nothing written")
    else:
        removed = fsio.clean_stale_pycache(engine.target)
        if removed:
            notes.append(f"removed {len(removed)} stale bytecode file(s) left by an interrupted run")
    if a.backup is BackupState.PRESENT:
        if not_writable is None:
            fsio.remove(a.backup_path)
            notes.append(f"removed a leftover backup identical to the target ({a.backup_path.name})")
        else:
            notes.append(f"a leftover backup identical to the target stays ({a.backup_path.name}; harmless)")
    elif a.backup in (BackupState.STALE, BackupState.CORRUPT):
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
        notes += _clean_set_aside(engine.target, clean)
        notes += _tidy_legacy(engine.target)
    return Result(
        "revert",
        EXIT_OK,
        "\n".join([msg] + [f"note: {n}" for n in notes]),
        {**_report(a), "changed": False, "restored": False, "notes": a.notes + notes},
    )


def _clean_set_aside(target: Path, clean: bool) -> list[str]:
    if not clean:
        return []
    return [f"removed the set-aside backup {p.name} (--clean)" for p in set_aside_backups(target) if fsio.remove(p)]


def _restore(a: Assessment, manifest: Manifest, clean: bool, notes: list[str]) -> Result:
    e = a.engine
    data = a.backup_path.read_bytes()
    if sha256_hex(data) != a.backup_sha256:  # changed since assessed: we hold the lock, so never
        raise ModifiedFile(f"{a.backup_path} changed while reverting: nothing written; run revert again")
    fsio.atomic_write(e.target, data, like=e.target, fault_temp=True)
    fsio.fault("after-replace")
    fsio.remove(a.backup_path)
    fsio.fault("after-backup-removed")
    removed = fsio.clean_pycache(e.target)
    fsio.fault("after-pycache")
    notes = notes + _clean_set_aside(e.target, clean)
    if removed:
        notes.append(f"removed {len(removed)} stale bytecode file(s)")
    notes += _tidy_legacy(e.target)
    msg = f"reverted: {e.target} holds its pristine bytes again (sha256 {a.backup_sha256}); backup removed"
    return Result(
        "revert",
        EXIT_OK,
        "\n".join([msg] + [f"note: {n}" for n in notes]),
        {
            **_report(a),
            "state_before": a.state.value,
            "state": assess(e, manifest).state.value,
            "changed": True,
            "restored": True,
            "notes": a.notes + notes,
            "pycache_removed": [str(p) for p in removed],
        },
    )

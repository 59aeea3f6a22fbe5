"""Plan an apply: which pristine bytes to patch, and the checked output to write.

`make_plan` reads nothing from disk beyond the assessment (and the backup when upgrading
an older patch) and writes nothing: it returns a `Plan` whose output has passed
`output_check.check_output`, or raises the error that says why this target is not
patched. The transform (libcst) is imported only here, and only when a plan is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import readfile, shell
from .engine import reinstall_hint
from .errors import ModifiedFile, TransformError, UnpinnedFile
from .hashing import sha256_hex
from .manifest import Manifest, Pin
from .output_check import check_output
from .paths import CONFIG_REL, POLICY_REL, rel_of
from .sentinel import PATCH_ID
from .state import Assessment, BackupState, State, classify

PatchSource = Callable[[str], str]


def default_patch_source() -> PatchSource:
    from .transform import patch_source  # libcst: imported only when a patch is made

    return patch_source


def default_policy_patch_source() -> PatchSource:
    """The transform of the engine's start-up policy file (`paths.POLICY_REL`)."""
    from .transform import patch_policy_source

    return patch_policy_source


def default_config_patch_source() -> PatchSource:
    """The transform of the engine's VllmConfig module (`paths.CONFIG_REL`)."""
    from .transform import patch_config_source

    return patch_config_source


def default_patch_source_for(rel: str) -> PatchSource:
    """The transform of one file of the set, by its path in site-packages."""
    if rel == POLICY_REL:
        return default_policy_patch_source()
    if rel == CONFIG_REL:
        return default_config_patch_source()
    return default_patch_source()


# Why a file is in the set, where a refusal of it has to say so (the layer's is plain).
WHY_PATCHED = {
    CONFIG_REL: (f"this release places the PLE table by itself from {CONFIG_REL} (its SM70 Qwen3.8 PLE "
                 "default), which ple4patch patches too so that an NVFP4 request skips it, but ple4patch "
                 "ships no pin for these bytes (the module changes with almost every release)"),
}


@dataclass
class Plan:
    source: bytes  # the pristine bytes the output is made from
    source_sha: str
    pin: Pin | None  # None: unpinned, applied with --allow-unknown
    output: bytes
    output_sha: str
    from_backup: bool  # upgrading an older patch: the source is the backup
    opted_in: bool = False  # unpinned, but an earlier `apply --allow-unknown` pinned these bytes locally


def source_for(a: Assessment, manifest: Manifest) -> tuple[bytes, Pin | None, bool]:
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
                f"{a.backup.value}, so its pristine bytes are unknown: {a.corrupt_backup_first()}reinstall "
                f"the engine ({reinstall_hint(e)}), then run `{shell.ple4patch('apply', e.venv)}` again"
            )
        data = readfile.read_regular(a.backup_path, follow=False)
        source = classify(sha256_hex(data), None, e.record_sha256, manifest)
        return data, source.pin, True
    if a.state is State.MODIFIED:
        fix = a.pins_fix() if a.lost_pin() else f"{a.foreign_patch_fix()}reinstall the engine ({reinstall_hint(e)}), then apply"
        raise ModifiedFile(f"{e.target} {a.modified_why()}: nothing written; {a.corrupt_backup_first()}{fix}")
    raise AssertionError(a.state)  # PATCHED, MISSING are handled by the caller


def build_output(source_text: str, path: str, pin: Pin | None, patch_source: PatchSource) -> bytes:
    """Run the transform and check its output (sentinel, compiles, hash pin): the bytes to write."""
    try:
        out = patch_source(source_text)
    except TransformError as err:
        raise err.in_file(path) from None
    return check_output(out, path, pin)


def make_plan(a: Assessment, manifest: Manifest, *, allow_unknown: bool, dry_run: bool,
              patch_source: PatchSource) -> Plan:
    e = a.engine
    source, pin, from_backup = source_for(a, manifest)
    opted_in = pin is not None and pin.is_local  # an earlier `apply --allow-unknown` of these bytes
    if opted_in and pin.patch_id != PATCH_ID:
        # Recorded by an older ple4patch: the opt-in was for these engine bytes, and it stands;
        # the output of this build is pinned anew when it is written (the old id kept as older).
        pin = None
    if pin is None and not (allow_unknown or dry_run or opted_in):
        why = WHY_PATCHED.get(rel_of(e.target))
        shipped = f"{e.target} is as shipped with 1cat-vllm {e.version} (matches its RECORD)"
        what = f"{shipped}, and {why}" if why else f"{shipped} but no manifest pins it"
        raise UnpinnedFile(
            f"{what}: {a.corrupt_backup_first()}review the change with `{shell.ple4patch('apply', '--dry-run', e.venv)}`, then "
            f"opt in with `{shell.ple4patch('apply', '--allow-unknown', e.venv)}`"
        )
    if a.backup is BackupState.CORRUPT and not from_backup:
        # Not a backup ple4patch made of any known file: it may be somebody's own file, so it is
        # neither moved nor overwritten. (A stale backup of a known file is set aside instead.)
        what = f"sha256 {a.backup_sha256[:12]}" if a.backup_sha256 else "not a readable regular file"
        again = shell.ple4patch("apply", *(["--dry-run"] if dry_run else []),
                                *(["--allow-unknown"] if pin is None and allow_unknown else []), e.venv)
        raise ModifiedFile(
            f"{a.backup_path} is in the way of the backup ({what}; not made by ple4patch from any "
            f"known file): nothing written. Move it away, then run `{again}` again"
        )
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        raise ModifiedFile(f"{e.target} is not UTF-8 text (a coding declaration for another encoding, or "
                           "bytes of one): ple4patch patches UTF-8 sources only, as 1Cat-vLLM ships them; "
                           "nothing written, and this engine build cannot be patched") from None
    output = build_output(text, str(e.target), pin, patch_source)
    return Plan(source, sha256_hex(source), pin, output, sha256_hex(output), from_backup, opted_in)


def is_patched_output_of(backup: bytes, current: bytes, rel: str) -> bool:
    """Last resort when no pin links them: does the transform of `rel` turn `backup` into `current`?"""
    try:
        text = backup.decode("utf-8")
        transform = default_patch_source_for(rel)
        return transform(text).encode("utf-8") == current
    except (UnicodeDecodeError, TransformError, ImportError):
        return False

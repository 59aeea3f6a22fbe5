"""apply / status / verify / revert mechanics, called as commands with a tiny fake transform.

The real transform is exercised in test_matrix.py and test_cli.py; here the
transform is `fakepatch.fake_patch` so the states, backups, locking and
refusals are tested fast and on their own.
"""

from __future__ import annotations

import os
import threading

import pytest

import kit
from kit import site_snapshot
from kit.fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest, fake_patch, fake_patch_old
from ple4patch import commands, fsio, paths
from ple4patch import manifest as m
from ple4patch.errors import (
    EXIT_INTERNAL,
    LockTimeout,
    ModifiedFile,
    NotWritable,
    Ple4Error,
    TransformError,
    UnpinnedFile,
    VerifyFailed,
)
from ple4patch.paths import TARGET_REL, backup_path
from ple4patch.sentinel import PATCH_ID

MAN = fake_manifest(PRISTINE_A, PRISTINE_B)


def do(action, venv, **kw):
    kw.setdefault("manifest", MAN)
    if action is commands.apply.run:
        kw.setdefault("patch_source", fake_patch)
    return action(venv, **kw)


@pytest.fixture
def venv_a(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine(PRISTINE_A, version="1.5.0"))


def test_full_cycle(venv_a):
    target = kit.target_of(venv_a)
    pyc = list((target.parent / "__pycache__").glob("ple_layer.*.pyc"))
    assert pyc, "pip compiles the target: the stale .pyc is there before apply"
    before = site_snapshot(venv_a)

    r = do(commands.status.run, venv_a)
    assert (r.exit_code, r.data["state"], r.data["backup"]["state"]) == (0, "pristine", "absent")

    r = do(commands.apply.run, venv_a, dry_run=True)
    assert r.exit_code == 0 and r.data["diff"].startswith("--- a/vllm/models/qwen4_exp/nvidia/ple_layer.py")
    assert "+PLE4_FAKE_PATCH" in r.data["diff"]
    assert site_snapshot(venv_a) == before, "dry run wrote something"

    r = do(commands.apply.run, venv_a)
    assert r.data["changed"] is True and r.data["state"] == "patched"
    assert target.read_bytes() == fake_patch(PRISTINE_A.decode()).encode()
    assert backup_path(target).read_bytes() == PRISTINE_A
    assert not list((target.parent / "__pycache__").glob("ple_layer.*.pyc"))
    patched = site_snapshot(venv_a)
    ino = target.stat().st_ino

    r = do(commands.apply.run, venv_a)
    assert r.exit_code == 0 and r.data["changed"] is False and "nothing changed" in r.message
    assert site_snapshot(venv_a) == patched and target.stat().st_ino == ino

    r = do(commands.status.run, venv_a)
    assert (r.data["state"], r.data["backup"]["state"]) == ("patched", "present")
    assert r.data["hashes"]["current"] == r.data["hashes"]["pinned_patched"]
    assert do(commands.verify.run, venv_a).exit_code == 0

    r = do(commands.revert.run, venv_a)
    assert r.data["restored"] is True and r.data["state"] == "pristine"
    assert target.read_bytes() == PRISTINE_A
    assert not backup_path(target).exists()
    after = site_snapshot(venv_a)
    assert {k: v for k, v in after.items() if "ple4patch" not in k and "__pycache__" not in k} == {
        k: v for k, v in before.items() if "__pycache__" not in k
    }
    assert do(commands.status.run, venv_a).data["state"] == "pristine"
    r = do(commands.revert.run, venv_a)
    assert r.exit_code == 0 and r.data["changed"] is False
    assert r.message.splitlines()[0] == f"nothing to revert: {kit.target_of(venv_a)} is pristine"  # said once


def test_mode_kept_and_hardlink_keeps_its_bytes(venv_a, tmp_path):
    target = kit.target_of(venv_a)
    os.chmod(target, 0o640)
    other = tmp_path / "hardlink.py"
    os.link(target, other)
    r = do(commands.apply.run, venv_a)
    assert any("hard-linked" in n for n in r.data["notes"])
    assert other.read_bytes() == PRISTINE_A
    assert target.stat().st_ino != other.stat().st_ino
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)
    assert oct(backup_path(target).stat().st_mode & 0o777) == oct(0o640)


def test_symlinked_target_refused(venv_a, tmp_path):
    target = kit.target_of(venv_a)
    real = tmp_path / "real_ple_layer.py"
    real.write_bytes(PRISTINE_A)
    target.unlink()
    target.symlink_to(real)
    with pytest.raises(ModifiedFile, match="symlink"):
        do(commands.apply.run, venv_a)
    assert real.read_bytes() == PRISTINE_A and target.is_symlink()
    assert not backup_path(target).exists()


def test_unpinned_refused_then_allow_unknown(venv_a):
    target = kit.target_of(venv_a)
    empty = m.Manifest()
    with pytest.raises(UnpinnedFile) as info:
        do(commands.apply.run, venv_a, manifest=empty)
    assert "--dry-run" in str(info.value) and "--allow-unknown" in str(info.value)
    assert target.read_bytes() == PRISTINE_A and not backup_path(target).exists()
    assert do(commands.status.run, venv_a, manifest=empty).data["state"] == "unpinned"

    r = do(commands.apply.run, venv_a, manifest=empty, dry_run=True)
    assert "NOT pinned" in r.message and "+PLE4_FAKE_PATCH" in r.output

    r = do(commands.apply.run, venv_a, manifest=empty, allow_unknown=True)
    assert r.data["changed"] and r.data["pin"]["source"] == "local"
    assert paths.local_pins_path(target).is_file()
    # later commands need no flag
    r = do(commands.status.run, venv_a, manifest=empty)
    assert (r.data["state"], r.data["backup"]["state"]) == ("patched", "present")
    assert do(commands.apply.run, venv_a, manifest=empty).data["changed"] is False
    assert do(commands.verify.run, venv_a, manifest=empty).exit_code == 0
    assert do(commands.revert.run, venv_a, manifest=empty).data["restored"]
    assert target.read_bytes() == PRISTINE_A
    assert do(commands.status.run, venv_a, manifest=empty).data["state"] == "pristine"
    assert do(commands.apply.run, venv_a, manifest=empty).data["changed"] is True


def test_lock_and_local_pins_live_in_site_packages_root(venv_a):
    """Not in the engine's package: pip uninstall would leave them there, keeping `vllm/` alive."""
    target = kit.target_of(venv_a)
    site = kit.site_packages(venv_a)
    do(commands.apply.run, venv_a, manifest=m.Manifest(), allow_unknown=True)
    assert paths.local_pins_path(target) == site / ".ple4patch-pins.json"
    assert paths.local_pins_path(target).is_file() and (site / paths.LOCK_NAME).is_file()
    assert [n for n in os.listdir(target.parent) if "ple4patch" in n] == []
    # a temp file of the pins that a killed run left there is named and removed like any other
    leftover = site / ".ple4patch-tmp-.ple4patch-pins.json-4242-0badf00d"
    leftover.write_bytes(b"{")
    assert any(leftover.name in n for n in do(commands.status.run, venv_a, manifest=m.Manifest()).data["notes"])
    do(commands.apply.run, venv_a, manifest=m.Manifest())
    assert not leftover.exists()


def test_modified_refused_and_nothing_written(venv_a):
    target = kit.target_of(venv_a)
    target.write_bytes(PRISTINE_A + b"# local edit\n")
    before = site_snapshot(venv_a)
    assert do(commands.status.run, venv_a).data["state"] == "modified"
    for kw in ({}, {"allow_unknown": True}, {"dry_run": True}):
        with pytest.raises(ModifiedFile, match="neither"):
            do(commands.apply.run, venv_a, **kw)
    with pytest.raises(ModifiedFile):
        do(commands.revert.run, venv_a)
    with pytest.raises(VerifyFailed):
        do(commands.verify.run, venv_a)
    assert site_snapshot(venv_a) == before


def test_transform_output_must_match_pin(venv_a):
    target = kit.target_of(venv_a)
    with pytest.raises(Ple4Error) as info:
        do(commands.apply.run, venv_a, patch_source=lambda t: fake_patch(t) + "# drift\n")
    assert info.value.exit_code == EXIT_INTERNAL and "make pin" in str(info.value)
    assert target.read_bytes() == PRISTINE_A and not backup_path(target).exists()


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda t: fake_patch(t) + "def broken(:\n", "does not compile"),
        (lambda t: t + "\nX = 3\n", "sentinel"),
        (lambda t: fake_patch(fake_patch(t)), "sentinel"),
    ],
)
def test_bad_transform_output_never_reaches_disk(venv_a, bad, match):
    target = kit.target_of(venv_a)
    for allow in (False, True):
        with pytest.raises(Ple4Error, match=match):
            do(commands.apply.run, venv_a, manifest=m.Manifest(), allow_unknown=True, patch_source=bad)
    assert target.read_bytes() == PRISTINE_A and not backup_path(target).exists()
    assert not paths.local_pins_path(target).exists()


def test_transform_error_refuses_with_its_own_kind(venv_a):
    def fails(text):
        raise TransformError("Qwen4ExpNGramEmbedding.__init__", "dispatch on ple_embedding_dtype not found")

    for dry_run in (False, True):
        with pytest.raises(TransformError, match="does not fit .*ple_layer.py: anchor 'Qwen4ExpNGramEmbedding") as err:
            do(commands.apply.run, venv_a, patch_source=fails, dry_run=dry_run)
        assert (err.value.kind, err.value.exit_code) == ("transform", 5)
    assert not backup_path(kit.target_of(venv_a)).exists()


def test_an_unusable_local_pins_file_of_the_patched_layer_is_named(wheelhouse, engine_venv):
    """The layer applied with --allow-unknown (no other pin), then its local pins file damaged:
    status, verify and apply name that file and the steps, which patch it again as said (the
    real transform: revert checks with it that the file is its backup's patched output)."""
    venv_a = engine_venv(wheelhouse.engine(kit.standin_bytes()))
    none = m.Manifest()
    do(commands.apply.run, venv_a, manifest=none, allow_unknown=True, patch_source=None)
    pins = paths.local_pins_path(kit.target_of(venv_a))
    pins.write_bytes(b'{"schema_version": 1, "pins": []}')
    steps = (f"move {pins} away", f"then `ple4patch revert {venv_a}`", f"then `ple4patch apply --allow-unknown {venv_a}`")
    r = do(commands.status.run, venv_a, manifest=none)
    assert r.data["state"] == "modified" and f"its local pins file {pins} is unusable" in r.message
    assert all(step in r.message for step in steps) and "reinstall" not in r.message, r.message
    with pytest.raises(VerifyFailed) as err:
        do(commands.verify.run, venv_a, manifest=none)
    assert all(step in str(err.value) for step in steps), err.value
    with pytest.raises(ModifiedFile) as err:
        do(commands.apply.run, venv_a, manifest=none, allow_unknown=True, patch_source=None)
    assert f"{pins} is unusable" in str(err.value) and all(step in str(err.value) for step in steps), err.value
    bak = backup_path(kit.target_of(venv_a))  # without its backup revert cannot help: a reinstall instead
    kept = bak.read_bytes()
    bak.unlink()
    r = do(commands.status.run, venv_a, manifest=none)
    assert steps[0] in r.message and "reinstall the engine" in r.message and "revert" not in r.message, r.message
    bak.write_bytes(kept)
    pins.unlink()
    assert do(commands.revert.run, venv_a, manifest=none).data["state"] == "unpinned"
    do(commands.apply.run, venv_a, manifest=none, allow_unknown=True, patch_source=None)
    assert do(commands.verify.run, venv_a, manifest=none).exit_code == 0


def test_verify_fails_without_backup_or_with_corrupt_backup(venv_a):
    target = kit.target_of(venv_a)
    with pytest.raises(VerifyFailed, match="pristine"):
        do(commands.verify.run, venv_a)
    do(commands.apply.run, venv_a)
    bak = backup_path(target)
    bak.write_bytes(PRISTINE_A[:-3])
    assert do(commands.status.run, venv_a).data["backup"]["state"] == "corrupt"
    with pytest.raises(VerifyFailed, match="corrupt"):
        do(commands.verify.run, venv_a)
    with pytest.raises(ModifiedFile, match="corrupt"):
        do(commands.revert.run, venv_a)
    bak.unlink()
    with pytest.raises(VerifyFailed, match="absent"):
        do(commands.verify.run, venv_a)
    r = do(commands.apply.run, venv_a)
    assert r.data["changed"] is False and "warning" in r.message


def test_upgrade_leaves_stale_backup_never_restored(wheelhouse, venv_a):
    target = kit.target_of(venv_a)
    do(commands.apply.run, venv_a)
    # the user upgrades the engine: pip replaces the (patched) file, the backup stays
    kit.install(venv_a, wheelhouse.engine(PRISTINE_B, version="1.5.1"))
    assert target.read_bytes() == PRISTINE_B and backup_path(target).read_bytes() == PRISTINE_A
    r = do(commands.status.run, venv_a)
    assert (r.data["engine"]["version"], r.data["state"], r.data["backup"]["state"]) == ("1.5.1", "pristine", "stale")
    with pytest.raises(VerifyFailed):
        do(commands.verify.run, venv_a)

    r = do(commands.revert.run, venv_a)
    assert r.exit_code == 0 and r.data["restored"] is False
    assert any("revert --clean" in n for n in r.data["notes"])
    assert target.read_bytes() == PRISTINE_B and backup_path(target).read_bytes() == PRISTINE_A

    r = do(commands.revert.run, venv_a, clean=True)
    assert not backup_path(target).exists() and target.read_bytes() == PRISTINE_B


def test_apply_sets_stale_backup_aside(wheelhouse, venv_a):
    target = kit.target_of(venv_a)
    do(commands.apply.run, venv_a)
    kit.install(venv_a, wheelhouse.engine(PRISTINE_B, version="1.5.1"))
    r = do(commands.apply.run, venv_a)
    assert r.data["changed"] and any("set aside" in n for n in r.data["notes"])
    assert backup_path(target).read_bytes() == PRISTINE_B
    (aside,) = target.parent.glob("ple_layer.py.bak-pre-ple4.stale-*")
    assert aside.read_bytes() == PRISTINE_A
    assert do(commands.verify.run, venv_a).exit_code == 0
    do(commands.revert.run, venv_a, clean=True)
    assert target.read_bytes() == PRISTINE_B
    assert not backup_path(target).exists() and not aside.exists()


def test_patched_by_older_patch_id_is_upgraded(venv_a):
    target = kit.target_of(venv_a)
    man = fake_manifest(PRISTINE_A, older=True)
    # what an older ple4patch left: its backup and its output
    backup_path(target).write_bytes(PRISTINE_A)
    target.write_bytes(fake_patch_old(PRISTINE_A.decode()).encode())
    r = do(commands.status.run, venv_a, manifest=man)
    assert (r.data["state"], r.data["patch_id"], r.data["backup"]["state"]) == (
        "patched_older",
        "nvfp4-rowpacked-0",
        "present",
    )
    with pytest.raises(VerifyFailed, match="older"):
        do(commands.verify.run, venv_a, manifest=man)
    r = do(commands.apply.run, venv_a, manifest=man)
    assert r.data["changed"] and "upgraded" in r.message
    assert target.read_bytes() == fake_patch(PRISTINE_A.decode()).encode()
    assert do(commands.verify.run, venv_a, manifest=man).exit_code == 0


def test_older_patch_without_backup_refused(venv_a):
    target = kit.target_of(venv_a)
    man = fake_manifest(PRISTINE_A, older=True)
    target.write_bytes(fake_patch_old(PRISTINE_A.decode()).encode())
    assert do(commands.status.run, venv_a, manifest=man).data["state"] == "patched_older"
    with pytest.raises(ModifiedFile, match="reinstall"):
        do(commands.apply.run, venv_a, manifest=man)


NEWER_PATCH_ID = "nvfp4-rowpacked-9999"  # what a newer ple4patch would write


@pytest.mark.parametrize("case", ["older-then-edited", "older-unpinned", "newer"])
def test_a_sentinel_without_a_known_output_is_modified(case, venv_a):
    """Only a known output hash makes a file `patched_older`: a file an older ple4patch patched
    and then edited by hand, or one a newer ple4patch patched, is `modified`; apply and revert
    write nothing (the hand edit, or the newer patch, stays)."""
    from kit.fakepatch import OLD_PATCH_ID

    target = kit.target_of(venv_a)
    man = fake_manifest(PRISTINE_A, older=case != "older-unpinned")
    data = {
        "older-then-edited": fake_patch_old(PRISTINE_A.decode()).encode() + b"MY_HOTFIX = True\n",
        "older-unpinned": fake_patch_old(PRISTINE_A.decode()).encode(),
        "newer": fake_patch(PRISTINE_A.decode(), NEWER_PATCH_ID).encode(),
    }[case]
    target.write_bytes(data)
    backup_path(target).write_bytes(PRISTINE_A)
    before = site_snapshot(venv_a)
    r = do(commands.status.run, venv_a, manifest=man)
    assert (r.data["state"], r.data["backup"]["state"]) == ("modified", "present")
    pid = NEWER_PATCH_ID if case == "newer" else OLD_PATCH_ID
    assert r.data["patch_id"] == pid and pid in r.message and "upgrades" not in r.message
    unknown_id = case != "older-then-edited"  # no pin of this build names the id
    if unknown_id:
        assert "another ple4patch build" in r.message and "`ple4patch revert` with the ple4patch" in r.message
    with pytest.raises(ModifiedFile, match="nothing written") as err:
        do(commands.apply.run, venv_a, manifest=man)
    assert ("another ple4patch build" in str(err.value)) is unknown_id
    with pytest.raises(ModifiedFile, match="nothing written"):
        do(commands.revert.run, venv_a, manifest=man)
    with pytest.raises(VerifyFailed, match="modified"):
        do(commands.verify.run, venv_a, manifest=man)
    assert site_snapshot(venv_a) == before


def test_leftover_backup_identical_to_target_is_harmless(venv_a):
    target = kit.target_of(venv_a)
    backup_path(target).write_bytes(PRISTINE_A)  # a run killed right after writing the backup
    assert do(commands.status.run, venv_a).data["backup"]["state"] == "present"
    do(commands.apply.run, venv_a)
    assert do(commands.verify.run, venv_a).exit_code == 0


def test_lock_timeout(venv_a):
    target = kit.target_of(venv_a)
    held, release = threading.Event(), threading.Event()

    def hold():
        with fsio.locked(kit.site_packages(venv_a), timeout=1):  # where ple4patch locks
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(5)
        with pytest.raises(LockTimeout, match=f"another process holds .*\\(pid {os.getpid()} .*PLE4PATCH_LOCK_TIMEOUT=120"):
            do(commands.apply.run, venv_a, lock_timeout=0.2)
        with pytest.raises(LockTimeout):
            do(commands.revert.run, venv_a, lock_timeout=0.2)
        assert target.read_bytes() == PRISTINE_A
    finally:
        release.set()
        t.join()
    assert do(commands.apply.run, venv_a, lock_timeout=0.2).data["changed"]


def test_write_backup_never_overwrites_other_bytes(tmp_path):
    bak = tmp_path / "x.bak-pre-ple4"
    like = tmp_path / "x"
    like.write_bytes(b"x")
    assert fsio.write_backup(bak, b"one", like=like) is True
    assert fsio.write_backup(bak, b"one", like=like) is False
    with pytest.raises(ModifiedFile):
        fsio.write_backup(bak, b"two", like=like)
    assert bak.read_bytes() == b"one"


def test_write_error_is_not_writable_and_loses_nothing(venv_a, monkeypatch):
    import errno

    target = kit.target_of(venv_a)
    real_replace = os.replace

    def replace(src, dst):
        if str(dst) == str(target):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(NotWritable, match="read-only"):
        do(commands.apply.run, venv_a)
    assert target.read_bytes() == PRISTINE_A
    assert not list(target.parent.glob(".ple4patch-tmp-*"))
    monkeypatch.setattr(os, "replace", real_replace)
    # the backup this run wrote is taken back: the venv is as it was, and a re-run is fine
    r = do(commands.status.run, venv_a)
    assert (r.data["state"], r.data["backup"]["state"]) == ("pristine", "absent")
    assert do(commands.apply.run, venv_a).data["changed"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_read_only_directory_not_writable(venv_a):
    target = kit.target_of(venv_a)
    os.chmod(target.parent, 0o555)
    try:
        with pytest.raises(NotWritable):
            do(commands.apply.run, venv_a)
    finally:
        os.chmod(target.parent, 0o755)


def extra_manifest_file(tmp_path, label: str, patched: str | None = None):
    pin = fake_manifest(PRISTINE_A).pins[kit.sha256_hex(PRISTINE_A)]
    man = m.Manifest({pin.pristine_sha256: m.Pin(**{**pin.__dict__, "label": label,
                                                    "patched_sha256": patched or pin.patched_sha256})})
    path = tmp_path / "site-pins.json"
    path.write_text(man.dumps())
    return path


def test_a_bad_pin_of_an_extra_manifest_is_a_usage_error_naming_the_file(venv_a, tmp_path):
    from ple4patch.errors import EXIT_USAGE

    path = extra_manifest_file(tmp_path, "my site pin", patched="0" * 64)
    before = site_snapshot(venv_a)
    with pytest.raises(Ple4Error) as info:
        do(commands.apply.run, venv_a, manifest=m.load([path], use_env=False, shipped=False))
    msg = str(info.value)
    assert info.value.exit_code == EXIT_USAGE, msg
    assert str(path) in msg and "fix or drop it" in msg and "inconsistent" not in msg, msg
    assert site_snapshot(venv_a) == before


def test_control_characters_of_a_pin_label_are_escaped_in_text(venv_a, tmp_path):
    path = extra_manifest_file(tmp_path, "my site pin\nstate:   patched (fake)\r\x1b[31m")
    man = m.load([path], use_env=False, shipped=False)
    r = do(commands.status.run, venv_a, manifest=man)
    assert [line for line in r.message.splitlines() if line.startswith("state:")] == [
        "state:   pristine (pinned: my site pin\\nstate:   patched (fake)\\r\\x1b[31m)"]
    assert r.data["pin"]["label"] == "my site pin\nstate:   patched (fake)\r\x1b[31m"  # JSON keeps it as it is
    r = do(commands.apply.run, venv_a, manifest=man)
    assert "\x1b" not in r.message and "\r" not in r.message
    assert all(not line.startswith("state:") for line in r.message.splitlines())
    r = do(commands.verify.run, venv_a, manifest=man)
    assert "\x1b" not in r.message and "my site pin\\nstate:" in r.message


def test_patched_older_without_its_backup_promises_no_upgrade(venv_a):
    target = kit.target_of(venv_a)
    man = fake_manifest(PRISTINE_A, older=True)
    target.write_bytes(fake_patch_old(PRISTINE_A.decode()).encode())
    r = do(commands.status.run, venv_a, manifest=man)
    (state,) = [line for line in r.message.splitlines() if line.startswith("state:")]
    assert r.data["state"] == "patched_older" and "upgrades" not in state and "cannot upgrade" in state, state
    assert "reinstall the engine" in r.message.split("next:")[1]
    with pytest.raises(ModifiedFile, match="reinstall"):
        do(commands.apply.run, venv_a, manifest=man)


def reinstall_as_pip_does(venv, wheel) -> None:
    import subprocess

    subprocess.run([kit.PY, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--force-reinstall", "--no-deps", "--no-index", str(wheel)], check=True)


@pytest.mark.parametrize("what", ["target", "vllm-dir"])
def test_a_symlink_gets_a_next_step_that_works(what, wheelhouse, engine_venv, tmp_path):
    """apply refuses to write through a symlink (exit 5): status's next step is not `apply`, but
    what makes apply work; followed as printed (with the local wheel for pip), it does."""
    import re
    import shlex
    import shutil

    wheel = wheelhouse.engine(PRISTINE_A, version="1.5.0")
    venv = engine_venv(wheel)
    site = kit.site_packages(venv)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    link = kit.target_of(venv) if what == "target" else site / "vllm"
    shutil.move(link, moved / link.name)
    link.symlink_to(moved / link.name)
    r = do(commands.status.run, venv)
    nxt = r.message.split("next:")[1]
    assert not nxt.strip().startswith("ple4patch apply") and "reinstall the engine" in nxt, r.message
    with pytest.raises(ModifiedFile, match="symlink"):
        do(commands.apply.run, venv)
    reinstall_as_pip_does(venv, wheel)  # a reinstall alone: pip writes through a symlinked directory
    assert link.is_symlink() is (what == "vllm-dir")
    for cmd in re.findall(r"`rm ([^`]+)`", nxt):
        for p in shlex.split(cmd):
            os.unlink(p)
    reinstall_as_pip_does(venv, wheel)
    assert not link.is_symlink()
    assert do(commands.apply.run, venv).data["changed"]


def test_the_lock_file_is_readable_by_all_under_a_strict_umask(tmp_path):
    """Made under umask 077 it is still 0644-readable, so another user of a shared venv can open
    it to lock (flock needs no write access); one it cannot open is named with its mode and owner."""
    old = os.umask(0o077)
    try:
        with fsio.locked(tmp_path, timeout=0) as lock:
            assert lock.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)
    err = fsio._lock_unopenable(lock, PermissionError(13, "Permission denied"))
    assert f"cannot open the lock file {lock} (mode 0644, owner uid {os.getuid()})" in str(err)
    assert "chmod a+r" in str(err) and isinstance(err, fsio.NotWritable)


@pytest.mark.parametrize("left", ["patched", "reverted"])
def test_an_opt_in_of_an_older_ple4patch_stands_after_an_upgrade(venv_a, left):
    """A file applied with --allow-unknown by an older ple4patch (its local pin names the old
    patch id): this build upgrades it (or patches it again after a revert) with a plain `apply`,
    pins its own output beside the old one, and verify passes. The opt-in was for the engine's
    bytes; the output is this build's own."""
    from kit.fakepatch import OLD_PATCH_ID

    target = kit.target_of(venv_a)
    empty = m.Manifest()
    old_out = fake_patch_old(PRISTINE_A.decode()).encode()
    old_pin = m.local_pin(pristine=kit.sha256_hex(PRISTINE_A), patched=kit.sha256_hex(old_out),
                          patch_id=OLD_PATCH_ID, version="1.5.0", size=len(PRISTINE_A))
    paths.local_pins_path(target).write_bytes(m.add_local_pin(m.Manifest(), old_pin).dumps().encode())
    if left == "patched":  # what the older build's apply leaves
        target.write_bytes(old_out)
        backup_path(target).write_bytes(PRISTINE_A)
    r = do(commands.status.run, venv_a, manifest=empty)
    assert r.data["state"] == ("patched_older" if left == "patched" else "pristine"), r.message
    r = do(commands.apply.run, venv_a, manifest=empty, dry_run=True)
    assert "opted in by an earlier" in r.message and "upgrade it with: ple4patch apply /" in r.message, r.message
    r = do(commands.apply.run, venv_a, manifest=empty)
    assert r.data["changed"] and r.data["pin"]["source"] == "local"
    assert target.read_bytes() == fake_patch(PRISTINE_A.decode()).encode()
    assert backup_path(target).read_bytes() == PRISTINE_A
    pins = m.load_local(target).pins[kit.sha256_hex(PRISTINE_A)]
    assert pins.patch_id == PATCH_ID and pins.older == {OLD_PATCH_ID: kit.sha256_hex(old_out)}
    assert do(commands.status.run, venv_a, manifest=empty).data["state"] == "patched"
    assert do(commands.verify.run, venv_a, manifest=empty).exit_code == 0
    assert do(commands.revert.run, venv_a, manifest=empty).data["restored"]
    assert target.read_bytes() == PRISTINE_A


def test_a_local_pin_does_not_stand_for_other_bytes(venv_a):
    """The older opt-in is for its own pristine bytes only: another file is still unpinned."""
    from kit.fakepatch import OLD_PATCH_ID

    target = kit.target_of(venv_a)
    other = PRISTINE_B
    old_pin = m.local_pin(pristine=kit.sha256_hex(other), patched="0" * 64, patch_id=OLD_PATCH_ID,
                          version="1.5.0", size=len(other))
    paths.local_pins_path(target).write_bytes(m.add_local_pin(m.Manifest(), old_pin).dumps().encode())
    with pytest.raises(UnpinnedFile):
        do(commands.apply.run, venv_a, manifest=m.Manifest())
    assert target.read_bytes() == PRISTINE_A

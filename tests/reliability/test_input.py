"""Bad input: each gives one clear line on stderr, its documented exit code, and changes nothing.

"Nothing changed" is a sha256 over the whole site-packages tree (paths, modes, bytes;
the empty lock file ple4patch creates is skipped), taken before and after. Most cases run
the real CLI in a subprocess; the file-system faults that need root to be taken away
(read-only, permission denied, disk full) are simulated in-process around the real CLI
entry point, and a real read-only bind mount is used where `unshare` allows it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

import kit
from kit.fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest, fake_patch
from ple4patch import bytecode, cli, columns, commands, fsio, json_text, paths, plan, render
from ple4patch import manifest as m
from ple4patch.errors import (
    EXIT_ENGINE_NOT_FOUND,
    EXIT_INTERRUPTED,
    EXIT_LOCK_TIMEOUT,
    EXIT_MODIFIED,
    EXIT_NOT_WRITABLE,
    EXIT_OK,
    EXIT_VERIFY_FAILED,
)
from ple4patch.paths import TEMP_PREFIX, backup_path

PATCHED_A = fake_patch(PRISTINE_A.decode()).encode()
MAN = fake_manifest(PRISTINE_A)


@pytest.fixture
def env(fake_man):
    return kit.env_with([fake_man], **{fsio.LOCK_TIMEOUT_ENV: "5"})


def refused(command, venv_arg, env, code, *words, venv=None, extra=()):
    """Run `command`: exit `code`, one line naming `words`, same in --json, nothing changed."""
    before = kit.tree_hash(venv) if venv is not None else None
    proc = kit.fake_cli(command, venv_arg, *extra, env=env)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    line = kit.error_message(proc, command)
    for w in words:
        assert w in line, (w, line)
    d = kit.json_of(kit.fake_cli(command, venv_arg, *extra, "--json", env=env))
    assert d["exit_code"] == code and d["ok"] is False
    # text shows hashes short and files relative to site-packages, --json shows them whole
    assert columns.relative_to_site(render.short_hashes(d["error"]["message"])) in line
    if venv is not None:
        assert kit.tree_hash(venv) == before, "a refused command changed the venv"
    return line


# -- the venv argument ---------------------------------------------------------


def test_venv_missing(tmp_path, env):
    for command in ("apply", "revert", "verify"):
        refused(command, tmp_path / "nope", env, EXIT_ENGINE_NOT_FOUND, "no such venv", "nope")


def test_not_a_venv(tmp_path, env):
    (tmp_path / "notes.txt").write_text("x")
    for command in ("apply", "revert"):
        refused(command, tmp_path, env, EXIT_ENGINE_NOT_FOUND, "is not a Python venv")
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_venv_is_a_file(tmp_path, env):
    f = tmp_path / "venv"
    f.write_text("not a venv\n")
    refused("apply", f, env, EXIT_ENGINE_NOT_FOUND, str(f), "not a directory")
    assert f.read_text() == "not a venv\n"


def test_no_engine(new_venv, env):
    v = new_venv("empty")
    line = refused("apply", v, env, EXIT_ENGINE_NOT_FOUND, "1cat-vllm is not installed")
    assert str(v) in line


def test_upstream_vllm(wheelhouse, engine_venv, env):
    v = engine_venv(wheelhouse.engine(PRISTINE_A, name="vllm", version="0.11.0"))
    for command in ("apply", "revert"):
        refused(command, v, env, EXIT_ENGINE_NOT_FOUND, "upstream vllm", "1cat-vllm", venv=v)


def test_editable_install(wheelhouse, engine_venv, env):
    v = engine_venv(wheelhouse.editable(PRISTINE_A))
    refused("apply", v, env, EXIT_ENGINE_NOT_FOUND, "editable", venv=v)


# -- the target and its backup ---------------------------------------------------


def test_target_missing(venv, env):
    kit.target_of(venv).unlink()
    for command in ("apply", "revert", "verify"):
        refused(command, venv, env, EXIT_ENGINE_NOT_FOUND, "reinstall", venv=venv)


def test_target_modified_by_hand(venv, env):
    target = kit.target_of(venv)
    target.write_bytes(PRISTINE_A + b"# tuned by hand\n")
    refused("apply", venv, env, EXIT_MODIFIED, "neither", "reinstall", venv=venv)
    refused("apply", venv, env, EXIT_MODIFIED, "neither", venv=venv, extra=["--allow-unknown"])
    refused("revert", venv, env, EXIT_MODIFIED, "cannot revert", venv=venv)
    refused("verify", venv, env, EXIT_VERIFY_FAILED, "modified", venv=venv)


def test_patched_target_edited_afterwards(venv, env):
    target = kit.target_of(venv)
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    target.write_bytes(target.read_bytes() + b"# edited after patching\n")
    refused("apply", venv, env, EXIT_MODIFIED, "sentinel", venv=venv)
    refused("revert", venv, env, EXIT_MODIFIED, "cannot revert", venv=venv)
    assert backup_path(target).read_bytes() == PRISTINE_A


def test_target_is_a_symlink(venv, env, tmp_path):
    target = kit.target_of(venv)
    real = tmp_path / "elsewhere" / "ple_layer.py"
    real.parent.mkdir()
    real.write_bytes(PRISTINE_A)
    target.unlink()
    target.symlink_to(real)
    for command in ("apply", "revert"):
        refused(command, venv, env, EXIT_MODIFIED, "symlink", venv=venv)
    assert real.read_bytes() == PRISTINE_A and os.listdir(real.parent) == ["ple_layer.py"]


def test_target_hard_linked_like_uv_installs(venv, env, tmp_path):
    """uv links files from its cache: the cache's copy keeps its bytes through apply and revert."""
    target = kit.target_of(venv)
    cache = tmp_path / "uv-cache" / "ple_layer.py"
    cache.parent.mkdir()
    os.link(target, cache)
    d = kit.json_of(kit.fake_cli("apply", venv, "--json", env=env))
    assert d["changed"] and any("hard-linked" in n for n in d["notes"])
    assert target.read_bytes() == PATCHED_A and cache.read_bytes() == PRISTINE_A
    assert os.stat(cache).st_nlink == 1  # the target got its own inode
    assert kit.fake_cli("verify", venv, env=env).returncode == 0
    d = kit.json_of(kit.fake_cli("revert", venv, "--json", env=env))
    assert d["restored"] and target.read_bytes() == PRISTINE_A and cache.read_bytes() == PRISTINE_A
    assert os.stat(target).st_ino != os.stat(cache).st_ino


def test_backup_with_other_content_before_apply(venv, env):
    """A foreign file where the backup goes is neither moved nor overwritten: apply refuses (5),
    nothing changes (dry-run says the same); once the file is moved away, apply works."""
    target = kit.target_of(venv)
    foreign = b"# somebody's own file named like our backup\n"
    backup_path(target).write_bytes(foreign)
    refused("apply", venv, env, EXIT_MODIFIED, "in the way of the backup", "nothing written", "Move it away",
            venv=venv)
    refused("apply", venv, env, EXIT_MODIFIED, "in the way of the backup", venv=venv, extra=("--dry-run",))
    assert backup_path(target).read_bytes() == foreign and target.read_bytes() == PRISTINE_A
    assert not list(target.parent.glob(target.name + ".bak-pre-ple4.stale-*"))
    status = kit.fake_cli("status", venv, env=env)
    assert status.returncode == 0 and "backup:  corrupt" in status.stdout and "next:    move" in status.stdout
    backup_path(target).rename(target.parent / "mine.txt")
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    assert backup_path(target).read_bytes() == PRISTINE_A and (target.parent / "mine.txt").read_bytes() == foreign


def test_backup_with_other_content_at_revert(venv, env):
    target = kit.target_of(venv)
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    backup_path(target).write_bytes(b"X = 'not the pristine file'\n")
    refused("revert", venv, env, EXIT_MODIFIED, "corrupt", "nothing written", venv=venv)
    refused("verify", venv, env, EXIT_VERIFY_FAILED, "corrupt", venv=venv)
    assert target.read_bytes() == PATCHED_A


def test_backup_missing_at_revert(venv, env):
    target = kit.target_of(venv)
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    backup_path(target).unlink()
    refused("revert", venv, env, EXIT_MODIFIED, "absent", "reinstall", venv=venv)
    refused("verify", venv, env, EXIT_VERIFY_FAILED, "absent", venv=venv)
    assert target.read_bytes() == PATCHED_A


def test_backup_is_a_directory(venv, env):
    target = kit.target_of(venv)
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    backup_path(target).unlink()
    backup_path(target).mkdir()
    refused("revert", venv, env, EXIT_MODIFIED, "corrupt", venv=venv)
    assert target.read_bytes() == PATCHED_A


# -- dist-info -------------------------------------------------------------------


def test_dist_info_without_record(venv, env):
    (dist,) = kit.site_packages(venv).glob("1cat_vllm-*.dist-info")
    (dist / "RECORD").unlink()
    for command in ("apply", "revert"):
        refused(command, venv, env, EXIT_ENGINE_NOT_FOUND, "RECORD", "reinstall", venv=venv)


@pytest.mark.parametrize("metadata", [None, b"", b"\xff\xfe\x00garbage\n\n", b"Metadata-Version: 2.1\nName: 1cat-vllm\n"])
def test_broken_metadata_falls_back_to_the_dist_info_name(venv, env, metadata):
    """The version is only reported (the sha256 decides): a broken METADATA is not fatal."""
    (dist,) = kit.site_packages(venv).glob("1cat_vllm-*.dist-info")
    if metadata is None:
        (dist / "METADATA").unlink()
    else:
        (dist / "METADATA").write_bytes(metadata)
    d = kit.json_of(kit.fake_cli("status", venv, "--json", env=env))
    assert d["engine"]["version"] == "1.5.0" and d["state"] == "pristine"
    assert kit.fake_cli("apply", venv, env=env).returncode == EXIT_OK
    assert kit.fake_cli("revert", venv, env=env).returncode == EXIT_OK
    assert kit.target_of(venv).read_bytes() == PRISTINE_A


# -- paths -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my venv", "vénv ü 空 env", "latin1-\udce9-venv"], ids=["spaces", "utf8", "non-utf8-byte"])
def test_paths_with_spaces_and_non_ascii(fake_tpl, env, tmp_path, name):
    v = kit.clone(fake_tpl, tmp_path / "dir with space" / name)
    target = kit.target_of(v)
    for locale in ({}, {"LC_ALL": "C"}):
        e = {**env, **locale}
        proc = kit.fake_cli("apply", v, env=e)
        assert proc.returncode == 0, proc.stderr
        assert "patched:" in proc.stdout and proc.stderr == ""
        d = kit.json_of(kit.fake_cli("status", v, "--json", env=e))
        shown = d["engine"]["target"]  # valid Unicode: a non-UTF-8 byte escaped, its place listed
        escaped = "/engine/target" in d.get("escaped_strings", [])
        assert escaped == json_text.needs_escape(name)
        assert d["state"] == "patched" and (json_text.unescape(shown) if escaped else shown) == str(target)
        assert kit.fake_cli("verify", v, env=e).returncode == 0
        proc = kit.fake_cli("revert", v, env=e)
        assert proc.returncode == 0, proc.stderr
        assert target.read_bytes() == PRISTINE_A and not backup_path(target).exists()


# -- file-system faults ----------------------------------------------------------


class FaultyOS:
    """`os` as fsio sees it, with some calls failing the way a real file system fails."""

    def __init__(self, **fail):
        self._fail = fail  # name -> callable(args) -> errno or None
        self.partial_temps: list[str] = []

    def __getattr__(self, name):
        real = getattr(os, name)
        rule = self._fail.get(name)
        if rule is None:
            return real

        def call(*args, **kw):
            code = rule(self, *args)
            if code:
                raise OSError(code, os.strerror(code), str(args[0]) if args else None)
            return real(*args, **kw)

        return call


def run_cli_inprocess(monkeypatch, capsys, fake_man, *args) -> tuple[int, str, str]:
    monkeypatch.setattr(plan, "default_patch_source", lambda: fake_patch)
    monkeypatch.setenv("PLE4PATCH_EXTRA_MANIFESTS", str(fake_man))
    monkeypatch.delenv("PLE4PATCH_FAULT", raising=False)
    with pytest.raises(SystemExit) as info:
        cli.main([str(a) for a in args], prog_name="ple4patch")
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def _creating(path_arg, flags) -> bool:
    return bool(flags & os.O_CREAT)


FAULTS = {
    # the whole file system is read-only: nothing can be opened for writing
    "erofs-everywhere": (dict(open=lambda s, p, f, *a: errno.EROFS if f & (os.O_WRONLY | os.O_RDWR) else None),
                         "read-only"),
    # a directory root cannot write into (no root): creating files fails
    "eacces-create": (dict(open=lambda s, p, f, *a: errno.EACCES if f & os.O_CREAT else None), "owner"),
    # the temp files can be made but not renamed into place
    "erofs-replace": (dict(replace=lambda s, a, b: errno.EROFS), "read-only"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_not_writable_simulated(fault, command, venv, fake_man, monkeypatch, capsys):
    target = kit.target_of(venv)
    if command == "revert":
        assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]
    before = kit.tree_hash(venv)
    rules, hint = FAULTS[fault]
    monkeypatch.setattr(fsio, "os", FaultyOS(**rules))
    code, out, err = run_cli_inprocess(monkeypatch, capsys, fake_man, command, venv)
    monkeypatch.setattr(fsio, "os", os)
    assert code == EXIT_NOT_WRITABLE, err
    assert out == "" and kit.one_message(err, f"ple4patch {command}: error: cannot ")
    assert hint in err
    assert kit.temps(target) == []
    assert target.read_bytes() == (PRISTINE_A if command == "apply" else PATCHED_A)
    assert kit.tree_hash(venv) == before


class DiskFull:
    """ENOSPC in the middle of writing the n-th temp file (after half of it reached the disk)."""

    def __init__(self, nth: int):
        self.nth, self.seen, self.fds = nth, 0, set()

    def open(self, s, path, flags, *a):
        return None

    def install(self, monkeypatch):
        real_open, real_write = os.open, os.write
        me = self

        class OS:
            def __getattr__(self, name):
                return getattr(os, name)

            def open(self, path, flags, *a, **kw):
                fd = real_open(path, flags, *a, **kw)
                if os.path.basename(str(path)).startswith(TEMP_PREFIX):
                    me.seen += 1
                    if me.seen == me.nth:
                        me.fds.add(fd)
                return fd

            def write(self, fd, data):
                if fd in me.fds:
                    real_write(fd, bytes(data[: len(data) // 2]))
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real_write(fd, data)

        monkeypatch.setattr(fsio, "os", OS())


@pytest.mark.parametrize("nth", [1, 2], ids=["writing-the-backup", "writing-the-target"])
def test_disk_full_apply(nth, venv, fake_man, monkeypatch, capsys):
    target = kit.target_of(venv)
    before = kit.tree_hash(venv)
    DiskFull(nth).install(monkeypatch)
    code, out, err = run_cli_inprocess(monkeypatch, capsys, fake_man, "apply", venv)
    monkeypatch.setattr(fsio, "os", os)
    assert code == EXIT_NOT_WRITABLE and "free some disk space" in kit.one_message(err, "ple4patch apply: error: ")
    assert target.read_bytes() == PRISTINE_A and kit.temps(target) == []
    assert kit.tree_hash(venv) == before, "a failed apply left something behind"
    assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]  # space is back


# -- a failed apply --allow-unknown: the local pin it added and the backup it set aside go back


@pytest.fixture(scope="session")
def b_only_man(tmp_path_factory):
    """Pins only PRISTINE_B: the venv's PRISTINE_A is unpinned (apply needs --allow-unknown),
    and a backup holding B is a stale one (another engine version's)."""
    path = tmp_path_factory.mktemp("b-only") / "b_only_manifest.json"
    path.write_text(fake_manifest(PRISTINE_B).dumps())
    return path


def earlier_opt_in(target) -> None:
    """What an earlier version left: a local pin of its own file and its (now stale) backup."""
    other = m.local_pin(pristine="c" * 64, patched="d" * 64, patch_id="nvfp4-rowpacked-1", version="1.4.9", size=7)
    paths.local_pins_path(target).write_text(m.add_local_pin(m.Manifest(), other).dumps())
    backup_path(target).write_bytes(PRISTINE_B)


UNKNOWN_FAILURES = {
    "disk-full-backup": lambda target: DiskFull(1),
    "disk-full-pins": lambda target: DiskFull(2),
    "disk-full-target": lambda target: DiskFull(3),
    "erofs-replace-target": lambda target: FaultyOS(replace=lambda s, a, b: errno.EROFS if str(b) == str(target) else None),
}


@pytest.mark.parametrize("earlier", [False, True], ids=["fresh", "earlier-opt-in-and-stale-backup"])
@pytest.mark.parametrize("failure", list(UNKNOWN_FAILURES))
def test_failed_allow_unknown_apply_leaves_the_venv_as_it_was(failure, earlier, venv, b_only_man, monkeypatch, capsys):
    """Disk full at each write, or the target's replace refused: the local pin this run added
    is taken back (an earlier pins file keeps its bytes), a stale backup it set aside gets its
    name back, the backup it wrote goes: the site-packages hash is unchanged."""
    target = kit.target_of(venv)
    site = kit.site_packages(venv)
    if earlier:
        earlier_opt_in(target)
    pins_before = kit.sha(paths.local_pins_path(target))
    before = kit.tree_hash(venv)
    fault = UNKNOWN_FAILURES[failure](target)
    if isinstance(fault, DiskFull):
        fault.install(monkeypatch)
    else:
        monkeypatch.setattr(fsio, "os", fault)
    code, out, err = run_cli_inprocess(monkeypatch, capsys, b_only_man, "apply", venv, "--allow-unknown")
    monkeypatch.setattr(fsio, "os", os)
    assert code == EXIT_NOT_WRITABLE and kit.one_message(err, "ple4patch apply: error: "), err
    assert target.read_bytes() == PRISTINE_A
    assert kit.sha(paths.local_pins_path(target)) == pins_before, "the local pin of a failed run stayed"
    assert backup_path(target).exists() == earlier and list(site.rglob("*.stale-*")) == []
    assert kit.temps(target) == [] and list(site.glob(TEMP_PREFIX + "*")) == []
    assert kit.tree_hash(venv) == before, "a failed apply --allow-unknown left something behind"
    # the problem gone, the same command works
    code, out, err = run_cli_inprocess(monkeypatch, capsys, b_only_man, "apply", venv, "--allow-unknown")
    assert code == 0 and target.read_bytes() == PATCHED_A, err


@pytest.mark.parametrize("point", ["after-backup", "after-pins", "after-temp"])
def test_ctrl_c_allow_unknown_apply_leaves_the_venv_as_it_was(point, venv, b_only_man):
    target = kit.target_of(venv)
    earlier_opt_in(target)
    env = kit.env_with([b_only_man], **{fsio.LOCK_TIMEOUT_ENV: "5"})
    before = kit.tree_hash(venv)
    proc = kit.popen_for_ctrl_c(kit.fake_cmd("apply", venv, "--allow-unknown"),
                                env={**env, fsio.FAULT_ENV: f"sleep:{point}"})
    assert f"fault point {point}: sleeping" in proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert kit.tree_hash(venv) == before, "an interrupted apply --allow-unknown left something behind"
    assert backup_path(target).read_bytes() == PRISTINE_B
    proc = kit.fake_cli("apply", venv, "--allow-unknown", env=env)
    assert proc.returncode == 0 and target.read_bytes() == PATCHED_A, proc.stderr
    assert kit.fake_cli("verify", venv, env=env).returncode == 0


def test_disk_full_revert(venv, fake_man, monkeypatch, capsys):
    target = kit.target_of(venv)
    assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]
    before = kit.tree_hash(venv)
    DiskFull(1).install(monkeypatch)
    code, out, err = run_cli_inprocess(monkeypatch, capsys, fake_man, "revert", venv)
    monkeypatch.setattr(fsio, "os", os)
    assert code == EXIT_NOT_WRITABLE and "free some disk space" in err
    assert target.read_bytes() == PATCHED_A and backup_path(target).read_bytes() == PRISTINE_A
    assert kit.temps(target) == [] and kit.tree_hash(venv) == before


def _unshare_ro_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount --bind / /mnt 2>/dev/null || mount --bind /tmp /tmp"],
                           capture_output=True)
    return probe.returncode == 0


def run_on_read_only_site(venv, env, *args) -> subprocess.CompletedProcess:
    script = 'mount --bind "$SITE" "$SITE" && mount -o remount,ro,bind "$SITE" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *kit.fake_cmd(*args)],
                          capture_output=True, text=True, env={**env, "SITE": str(kit.site_packages(venv))})


@pytest.mark.skipif(not _unshare_ro_works(), reason="no user+mount namespaces here (unshare -rm)")
def test_read_only_venv_root_with_writable_site_packages(venv, env):
    """ple4patch writes only where pip writes (site-packages): a read-only venv root is fine."""
    script = ('mount --bind "$SITE" "$SITE" && mount --rbind "$VENV" "$VENV" && '
              'mount -o remount,ro,bind "$VENV" && ! touch "$VENV/probe" 2>/dev/null && '
              'for c in apply status verify revert; do "$@" $c "$VENV" || exit $?; done')
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *kit.fake_cmd()], capture_output=True,
                          text=True, env={**env, "SITE": str(kit.site_packages(venv)), "VENV": str(venv)})
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "patched:" in proc.stdout and "reverted:" in proc.stdout
    assert not (venv / "probe").exists() and kit.target_of(venv).read_bytes() == PRISTINE_A


@pytest.mark.skipif(not _unshare_ro_works(), reason="no user+mount namespaces here (unshare -rm)")
def test_read_only_image_patched_at_build_time(venv, env):
    """A hook re-running apply/verify/status in a read-only image that was patched when built:
    nothing to write, so it is not an error."""
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    before = kit.tree_hash(venv)
    for command in ("apply", "verify", "status"):
        proc = run_on_read_only_site(venv, env, command, venv, "--json")
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
    assert json.loads(proc.stdout)["state"] == "patched"
    assert kit.tree_hash(venv) == before


@pytest.mark.skipif(not _unshare_ro_works(), reason="no user+mount namespaces here (unshare -rm)")
def test_read_only_pristine_venv_revert_verify_status(venv, env):
    """Nothing to revert in a read-only venv is not an error either (no write access needed);
    verify and status say what they say on a writable venv."""
    before = kit.tree_hash(venv)
    proc = run_on_read_only_site(venv, env, "revert", venv)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith("nothing to revert: ") and proc.stderr == ""
    proc = run_on_read_only_site(venv, env, "revert", venv, "--json")
    d = json.loads(proc.stdout)
    assert (proc.returncode, d["changed"], d["restored"], d["state"]) == (0, False, False, "pristine"), d
    proc = run_on_read_only_site(venv, env, "status", venv, "--json")
    assert (proc.returncode, json.loads(proc.stdout)["state"]) == (0, "pristine")
    proc = run_on_read_only_site(venv, env, "verify", venv, "--json")
    assert (proc.returncode, json.loads(proc.stdout)["error"]["kind"]) == (EXIT_VERIFY_FAILED, "verify_failed")
    assert kit.tree_hash(venv) == before


@pytest.mark.parametrize("clean", [False, True], ids=["revert", "revert-clean"])
def test_read_only_pristine_venv_revert_simulated(clean, venv, fake_man, monkeypatch, capsys):
    """The same with the whole file system read-only (simulated): revert has nothing to write,
    unless --clean asks it to remove a stale backup, which needs write access (exit 7)."""
    target = kit.target_of(venv)
    backup_path(target).write_bytes(PRISTINE_B)  # another engine version's backup: stale
    before = kit.tree_hash(venv)
    monkeypatch.setattr(fsio, "os", FaultyOS(**FAULTS["erofs-everywhere"][0]))
    args = ["revert", venv, "--json"] + (["--clean"] if clean else [])
    code, out, err = run_cli_inprocess(monkeypatch, capsys, fake_man, *args)
    monkeypatch.setattr(fsio, "os", os)
    d = json.loads(out)
    if clean:
        assert code == EXIT_NOT_WRITABLE and "read-only" in d["error"]["message"], d
    else:
        assert (code, d["changed"], d["state"]) == (0, False, "pristine"), d
        assert d["message"].startswith("nothing to revert: ") and any("revert --clean" in n for n in d["notes"])
    assert kit.tree_hash(venv) == before


def test_read_only_revert_with_stale_bytecode_is_an_error(venv, fake_man, monkeypatch, capsys):
    """A pristine file with an unchecked pyc of the patched bytes (a revert killed before its
    clean-up) still runs the patched code: that needs a write, so read-only is exit 7."""
    target = kit.target_of(venv)
    target.write_bytes(PATCHED_A)
    kit.compile_unchecked(target)
    target.write_bytes(PRISTINE_A)
    before = kit.tree_hash(venv)
    monkeypatch.setattr(fsio, "os", FaultyOS(**FAULTS["erofs-everywhere"][0]))
    code, out, err = run_cli_inprocess(monkeypatch, capsys, fake_man, "revert", venv)
    monkeypatch.setattr(fsio, "os", os)
    assert code == EXIT_NOT_WRITABLE and "read-only" in err, err
    assert kit.tree_hash(venv) == before


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_read_only_stale_timestamp_bytecode_needs_no_write(command, venv, fake_man, monkeypatch, capsys):
    """A timestamp pyc whose source mtime moved (an image layer, a copy) is checked at import and
    only recompiled: in a read-only venv with nothing else to do, that is still exit 0."""
    target = kit.target_of(venv)
    if command == "apply":
        assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]
    import py_compile
    import importlib.util

    pyc = py_compile.compile(str(target), cfile=importlib.util.cache_from_source(str(target)), doraise=True)
    st = os.stat(target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))  # the pyc's timestamp no longer fits
    assert bytecode.stale_pycache(target) == [Path(pyc)] and bytecode.unchecked_stale_pycache(target) == []
    before = kit.tree_hash(venv)
    monkeypatch.setattr(fsio, "os", FaultyOS(**FAULTS["erofs-everywhere"][0]))
    code, out, err = run_cli_inprocess(monkeypatch, capsys, fake_man, command, venv)
    monkeypatch.setattr(fsio, "os", os)
    assert code == 0 and ("already patched" if command == "apply" else "nothing to revert") in out, (out, err)
    assert kit.tree_hash(venv) == before


def test_verify_and_status_never_take_the_lock(venv, env):
    """They only read: they neither wait for a held lock nor create the lock file."""
    site = kit.site_packages(venv)
    for command, code in (("status", 0), ("verify", EXIT_VERIFY_FAILED)):
        assert kit.fake_cli(command, venv, env=env).returncode == code
    assert not list(site.rglob(paths.LOCK_NAME)), "status/verify created a lock file"
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    fd = os.open(site / paths.LOCK_NAME, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another ple4patch holds the venv
    try:
        for command in ("status", "verify"):
            proc = kit.fake_cli(command, venv, env={**env, fsio.LOCK_TIMEOUT_ENV: "0"}, timeout=20)
            assert proc.returncode == 0, (command, proc.stderr)
        assert kit.fake_cli("revert", venv, env={**env, fsio.LOCK_TIMEOUT_ENV: "0"}).returncode == EXIT_LOCK_TIMEOUT
    finally:
        os.close(fd)


@pytest.mark.skipif(not _unshare_ro_works(), reason="no user+mount namespaces here (unshare -rm)")
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_read_only_site_packages_real_mount(command, venv, env):
    """A real read-only bind mount of site-packages (root cannot write there either)."""
    if command == "revert":
        assert kit.fake_cli("apply", venv, env=env).returncode == 0
    before = kit.tree_hash(venv)
    proc = run_on_read_only_site(venv, env, command, venv, "--json")
    d = json.loads(proc.stdout)
    assert proc.returncode == EXIT_NOT_WRITABLE, (proc.stdout, proc.stderr)
    assert d["error"]["kind"] == "not_writable" and "read-only" in d["error"]["message"], d
    assert kit.tree_hash(venv) == before


# -- Ctrl-C ----------------------------------------------------------------------

# (command, step where Ctrl-C lands, does the command's write land before it?)
SIGINT_CASES = [
    ("apply", "after-lock", False),
    ("apply", "after-backup", False),
    ("apply", "after-temp", False),
    ("apply", "after-replace", True),
    ("revert", "after-lock", False),
    ("revert", "after-temp", False),
    ("revert", "after-replace", True),
]


@pytest.mark.parametrize("command, point, landed", SIGINT_CASES, ids=[f"{c}-{p}" for c, p, _ in SIGINT_CASES])
def test_ctrl_c(command, point, landed, venv, env):
    target = kit.target_of(venv)
    if command == "revert":
        assert kit.fake_cli("apply", venv, env=env).returncode == 0
    kit.compile_unchecked(target)
    before = kit.tree_hash(venv)
    start = target.read_bytes()
    proc = kit.popen_for_ctrl_c(kit.fake_cmd(command, venv), env={**env, fsio.FAULT_ENV: f"sleep:{point}"})
    assert f"fault point {point}: sleeping" in proc.stderr.readline()  # it is at that step now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    msg = kit.one_message(err, f"ple4patch {command}: interrupted (Ctrl-C)")
    # The commands it suggests name this venv (as printed they run on it, not on $VIRTUAL_ENV).
    assert out == "" and f"ple4patch status {venv}`" in msg and f"ple4patch {command} {venv}`" in msg, msg
    assert kit.temps(target) == []
    if landed:
        assert target.read_bytes() == (PATCHED_A if command == "apply" else PRISTINE_A)
        if command == "apply":
            assert backup_path(target).read_bytes() == PRISTINE_A
    else:
        assert target.read_bytes() == start
        assert kit.tree_hash(venv) == before, "an interrupted run that wrote nothing must leave nothing"
    # the re-run finishes the job
    assert kit.fake_cli(command, venv, env=env).returncode == 0
    assert target.read_bytes() == (PATCHED_A if command == "apply" else PRISTINE_A)
    assert backup_path(target).exists() == (command == "apply")
    kit.assert_imports_current_source(venv)

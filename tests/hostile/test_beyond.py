"""Beyond the matrix, as a hostile user would try: links, mounts, odd venv paths, huge files.

Each case: the documented exit code (never 1, never a hang), nothing outside site-packages
written, nothing ple4patch did not write removed.
"""

from __future__ import annotations

import os
import py_compile
import shlex
import shutil
import subprocess

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_patch
from ple4patch.errors import EXIT_ENGINE_NOT_FOUND, EXIT_NOT_WRITABLE, EXIT_OK, EXIT_STALE_BYTECODE, EXIT_USAGE
from ple4patch.paths import LOCK_NAME, backup_path

PATCHED_A = fake_patch(PRISTINE_A.decode()).encode()


def test_symlinked_pycache_outside_is_never_written(hvenv, outside, cli_in):
    target = kit.target_of(hvenv)
    cache = target.parent / "__pycache__"
    shutil.rmtree(cache, ignore_errors=True)
    cache.symlink_to(outside)
    ts = outside / "ple_layer.cpython-311.pyc"
    py_compile.compile(str(target), cfile=str(ts), doraise=True)  # Python checks it: harmless
    code, out, _ = cli_in("apply", hvenv)
    assert code == EXIT_OK and "could not remove" in out and "symlink" in out
    assert ts.exists(), "removed a file outside site-packages"
    assert cli_in("revert", hvenv)[0] == EXIT_OK
    kit.compile_unchecked(target)  # one Python would run instead of the patched file
    code, _, err = cli_in("apply", hvenv)
    assert code == EXIT_STALE_BYTECODE and "symlink" in err, err
    assert ts.exists() and target.read_bytes() == PATCHED_A


def test_site_packages_itself_a_symlink(hvenv, hroot, cli_in):
    site = kit.site_packages(hvenv)
    real = hroot / "real-site"
    shutil.move(str(site), real)
    site.symlink_to(real)
    for command in ("apply", "verify", "revert"):
        assert cli_in(command, hvenv)[0] == EXIT_OK, command
    assert (real / kit.TARGET_REL).read_bytes() == PRISTINE_A


def test_venv_path_with_a_newline(htpl, hroot, cli_in):
    venv = kit.clone(htpl, hroot / "v\nnewline")
    assert cli_in("apply", venv)[0] == EXIT_OK
    kit.target_of(venv).write_bytes(b"edited\n")
    code, out, err = cli_in("apply", venv)
    assert code == 5 and kit.one_message(err, "ple4patch apply: error: ")  # one message (the newline shown as a space)


def test_venv_given_as_a_symlink(hvenv, hroot, cli_in):
    link = hroot / "venv-link"
    link.symlink_to(hvenv)
    assert cli_in("apply", link)[0] == EXIT_OK
    assert kit.target_of(hvenv).read_bytes() == PATCHED_A


def test_lock_hard_linked_to_a_file_outside(hvenv, outside, cli_in, need_root):
    theirs = outside / "theirs"
    theirs.write_bytes(b"data\n")
    os.chown(theirs, 0, 0)
    os.link(theirs, kit.site_packages(hvenv) / LOCK_NAME)
    os.chown(kit.site_packages(hvenv), 65534, 65534)
    assert cli_in("apply", hvenv)[0] == EXIT_OK
    assert theirs.read_bytes() == b"data\n" and os.stat(theirs).st_uid == 0  # not written, not handed over


def test_backup_hard_linked_to_a_file_outside(hvenv, outside, cli_in):
    theirs = outside / "pristine-copy"
    theirs.write_bytes(PRISTINE_A)
    os.link(theirs, backup_path(kit.target_of(hvenv)))
    assert cli_in("apply", hvenv)[0] == EXIT_OK
    assert cli_in("revert", hvenv)[0] == EXIT_OK
    assert theirs.read_bytes() == PRISTINE_A


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/proc/self/fd/0", "loop"])
def test_extra_manifest_is_a_device_stdin_or_a_loop(device, hvenv, hman, hroot, cli_in):
    if device == "loop":
        device = hroot / "loop.json"
        device.symlink_to(device)
    code, _, err = cli_in("status", hvenv, manifests=[hman, device])
    err = kit.one_message(err, "ple4patch status: error: ")
    assert code == EXIT_USAGE and ("not a regular file" in err or "symbolic links" in err), err


def test_site_packages_this_user_cannot_read(hvenv, hroot, hman, need_root):
    from hkit import NOBODY, as_user

    man = hroot / "m.json"
    shutil.copy(hman, man)
    os.chmod(man, 0o644)
    os.chmod(kit.site_packages(hvenv), 0o700)  # root's, as after a careless sudo pip install
    for command in ("status", "apply"):
        proc = as_user(NOBODY, command, hvenv, manifests=[man])
        assert proc.returncode == EXIT_NOT_WRITABLE and "cannot read" in proc.stderr, proc.stderr


def test_record_over_the_limit_and_a_big_real_one(hvenv, cli_in):
    (dist,) = kit.site_packages(hvenv).glob("1cat_vllm-*.dist-info")
    record = dist / "RECORD"
    data = record.read_bytes()
    row = b"vllm/x/module_%07d.py,sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,12345\n"
    record.write_bytes(b"".join(row % i for i in range(100_000)) + data)  # ~8 MiB: real, fast
    assert cli_in("apply", hvenv)[0] == EXIT_OK
    with open(record, "ab") as fh:
        fh.truncate(65 << 20)
    code, out, _ = cli_in("status", hvenv)
    assert code == EXIT_ENGINE_NOT_FOUND and "larger than" in out


def test_record_path_with_dot_dot(hvenv, cli_in):
    (dist,) = kit.site_packages(hvenv).glob("1cat_vllm-*.dist-info")
    record = dist / "RECORD"
    record.write_bytes(record.read_bytes().replace(b"vllm/models", b"vllm/../vllm/models"))
    assert cli_in("apply", hvenv)[0] == EXIT_OK


def test_file_bind_mounted_over_the_target(hvenv, outside, hman):
    """A file of elsewhere bind-mounted over the target: the replace fails (EBUSY), exit 7,
    the mounted file keeps its bytes."""
    if not shutil.which("unshare") or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no mount namespaces here")
    theirs = outside / "mounted.py"
    theirs.write_bytes(PRISTINE_A)
    target = kit.target_of(hvenv)
    cmd = " ".join(shlex.quote(str(c)) for c in kit.fake_cmd("apply", hvenv))
    script = f"mount --bind {shlex.quote(str(theirs))} {shlex.quote(str(target))} && {cmd}"
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                          text=True, env=kit.env_with([hman]), timeout=60)
    assert proc.returncode == EXIT_NOT_WRITABLE, (proc.stdout, proc.stderr)
    assert kit.error_message(proc, "apply") and "Traceback" not in proc.stderr
    assert theirs.read_bytes() == PRISTINE_A
    assert not backup_path(target).exists(), "the backup this run wrote was not taken back"


def test_dist_info_symlinked_to_elsewhere(hvenv, outside, cli_in):
    (dist,) = kit.site_packages(hvenv).glob("1cat_vllm-*.dist-info")
    shutil.move(str(dist), outside / dist.name)
    dist.symlink_to(outside / dist.name)
    code, _, err = cli_in("apply", hvenv)
    assert code == EXIT_ENGINE_NOT_FOUND and "symlink" in err, err

"""Ownership and the exit code after a write, tested for real as another user (setpriv).

A `sudo` run (root) must not lock the venv's owner out: the lock and the local pins it makes
are handed to the owner of site-packages (like the backup), and a lock file left by another
user is opened read-only (flock needs no write access). Once the target is written, a pyc
that cannot be removed is a note when Python checks it against the source, and exit 11
(`stale_bytecode`) when it is an unchecked-hash pyc of the old bytes, which Python would
run instead of the file; `verify` fails on it and `status` names it.
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil

import pytest

import kit
from hkit import NOBODY, as_user, chown_tree
from kit.fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest, fake_patch
from ple4patch.errors import EXIT_OK, EXIT_STALE_BYTECODE, EXIT_VERIFY_FAILED
from ple4patch.paths import LOCAL_PINS_NAME, LOCK_NAME


@pytest.fixture
def owned(hvenv, hroot, hman, need_root):
    """The venv owned by `nobody`, with a manifest copy it can read."""
    man = hroot / "manifest.json"
    shutil.copy(hman, man)
    chown_tree(hroot, NOBODY)
    return hvenv, man


def test_lock_made_by_root_is_handed_to_the_owner(owned, cli_in):
    venv, man = owned
    site = kit.site_packages(venv)
    assert cli_in("apply", venv, manifests=[man])[0] == EXIT_OK  # root, as in an image build
    lock = site / LOCK_NAME
    assert os.stat(lock).st_uid == NOBODY
    proc = as_user(NOBODY, "revert", venv, manifests=[man])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert kit.target_of(venv).read_bytes() == PRISTINE_A


def test_root_owned_lock_left_by_an_older_run_does_not_lock_the_owner_out(owned):
    venv, man = owned
    lock = kit.site_packages(venv) / LOCK_NAME
    lock.write_bytes(b"")
    os.chown(lock, 0, 0)
    os.chmod(lock, 0o644)
    proc = as_user(NOBODY, "apply", venv, manifests=[man])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert as_user(NOBODY, "verify", venv, manifests=[man]).returncode == EXIT_OK


def test_local_pins_made_by_root_are_handed_to_the_owner(owned, cli_in, hroot):
    venv, _ = owned
    only_b = hroot / "only-b.json"
    only_b.write_text(fake_manifest(PRISTINE_B).dumps())
    os.chown(only_b, NOBODY, NOBODY)
    code, out, err = cli_in("apply", "--allow-unknown", venv, manifests=[only_b])
    assert code == EXIT_OK, err
    pins = kit.site_packages(venv) / LOCAL_PINS_NAME
    assert os.stat(pins).st_uid == NOBODY
    for command in ("revert", "apply", "verify"):  # the owner goes on without any flag
        proc = as_user(NOBODY, command, venv, manifests=[only_b])
        assert proc.returncode == EXIT_OK, (command, proc.stderr)


def _root_pycache(venv, *, unchecked: bool):
    target = kit.target_of(venv)
    cache = target.parent / "__pycache__"
    cache.mkdir(exist_ok=True)
    if unchecked:
        pyc = kit.compile_unchecked(target)
    else:
        pyc = cache / f"{target.stem}.cpython-311.pyc"
        py_compile.compile(str(target), cfile=str(pyc), doraise=True)
    for p in (cache, pyc):
        os.chown(p, 0, 0)
    os.chmod(cache, 0o755)  # the owner of the venv cannot remove files in it
    return pyc


def test_stale_unchecked_pyc_that_cannot_be_removed_is_exit_11_and_verify_fails(owned, cli_in):
    venv, man = owned
    pyc = _root_pycache(venv, unchecked=True)
    proc = as_user(NOBODY, "apply", venv, manifests=[man])
    assert proc.returncode == EXIT_STALE_BYTECODE, proc.stderr
    err = kit.error_message(proc, "apply")
    assert kit.mentions(err, pyc, venv) and "would run" in err
    assert kit.target_of(venv).read_bytes() == fake_patch(PRISTINE_A.decode()).encode()  # written
    with pytest.raises(AssertionError, match="stale bytecode"):
        kit.assert_imports_current_source(venv)  # Python would indeed run the old code
    d = json.loads(as_user(NOBODY, "apply", venv, "--json", manifests=[man]).stdout)
    assert d["exit_code"] == EXIT_STALE_BYTECODE and d["error"]["kind"] == "stale_bytecode"
    v = as_user(NOBODY, "verify", venv, manifests=[man])
    assert v.returncode == EXIT_VERIFY_FAILED and kit.mentions(v.stderr, pyc, venv)
    s = as_user(NOBODY, "status", venv, manifests=[man])
    assert s.returncode == EXIT_OK and kit.mentions(s.stdout, pyc, venv)
    # the message says: run apply again as a user who can write there (root): that holds
    assert cli_in("apply", venv, manifests=[man])[0] == EXIT_OK
    assert not pyc.exists()
    kit.assert_imports_current_source(venv)
    assert cli_in("verify", venv, manifests=[man])[0] == EXIT_OK


def test_pyc_python_checks_is_a_note_after_the_write(owned):
    venv, man = owned
    pyc = _root_pycache(venv, unchecked=False)
    proc = as_user(NOBODY, "apply", venv, manifests=[man])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "could not remove" in proc.stdout and kit.mentions(proc.stdout, pyc, venv)
    for command in ("verify", "apply", "revert"):  # the next runs do not fail on it
        assert as_user(NOBODY, command, venv, manifests=[man]).returncode == EXIT_OK, command
    kit.assert_imports_current_source(venv)

"""Extended attributes and POSIX ACLs of the engine's files survive apply and revert.

A site whose service user reads the engine through an ACL (`setfacl -m u:svc:r`), or that tags
files with `user.*` attributes, must keep them: apply copies them onto the patched file and
onto the backup, revert onto the restored file, as `cp -a` would. Where one cannot be copied,
the command says which, in a note. Skipped where the file system of the test's temp dir takes
no `user.*` attributes.
"""

from __future__ import annotations

import errno
import os
import struct

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest, fake_patch
from ple4patch import commands, fsio
from ple4patch.paths import backup_path

MAN = fake_manifest(PRISTINE_A)
TAGS = {"user.origin": b"wheel", "user.site.note": b"reviewed 2025-11"}
ACL = "system.posix_acl_access"


def acl_granting_read(uid: int) -> bytes:
    """A POSIX ACL as the kernel stores it (version 2; tag, perm, id): owner rw, user `uid` r,
    group none, mask r, other none."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, uid), (0x04, 0, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
               (0x20, 0, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def xattrs(path) -> dict[str, bytes]:
    return {n: os.getxattr(path, n) for n in os.listxattr(path)}


@pytest.fixture
def venv_a(wheelhouse, engine_venv, tmp_path):
    probe = tmp_path / "probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.probe", b"1")
    except OSError as exc:
        pytest.skip(f"the file system of {tmp_path} takes no user.* extended attributes ({exc.strerror})")
    return engine_venv(wheelhouse.engine(PRISTINE_A, version="1.5.0"))


def tag(target, acl: bool) -> dict[str, bytes]:
    for name, value in TAGS.items():
        os.setxattr(target, name, value)
    if acl:
        os.chmod(target, 0o640)
        try:
            os.setxattr(target, ACL, acl_granting_read(4321))
        except OSError as exc:
            pytest.skip(f"no POSIX ACLs here ({exc.strerror})")
    return xattrs(target)


@pytest.mark.parametrize("acl", [False, True], ids=["user-xattrs", "acl"])
def test_apply_and_revert_keep_extended_attributes(acl, venv_a):
    target = kit.target_of(venv_a)
    want = tag(target, acl)
    mode = os.stat(target).st_mode
    r = commands.apply.run(venv_a, manifest=MAN, patch_source=fake_patch)
    assert r.data["changed"] and not any("extended attribute" in n for n in r.data["notes"])
    assert xattrs(target) == want, "the patched file lost them"
    assert xattrs(backup_path(target)) == want, "the backup lacks them"
    assert os.stat(target).st_mode == mode
    r = commands.revert.run(venv_a, manifest=MAN)
    assert r.data["restored"] and target.read_bytes() == PRISTINE_A
    assert xattrs(target) == want, "the restored file lost them"
    assert os.stat(target).st_mode == mode


def test_an_attribute_that_cannot_be_copied_is_named(venv_a, monkeypatch):
    target = kit.target_of(venv_a)
    tag(target, acl=False)
    real = os.setxattr

    def refuse_origin(where, name, value, *args, **kw):
        if name == "user.origin" and isinstance(where, int):  # onto a new file only
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        return real(where, name, value, *args, **kw)

    monkeypatch.setattr(fsio.os, "setxattr", refuse_origin)
    r = commands.apply.run(venv_a, manifest=MAN, patch_source=fake_patch)
    assert r.data["changed"]
    notes = [n for n in r.data["notes"] if "extended attribute" in n]
    assert len(notes) == 1 and "user.origin" in notes[0] and "user.site.note" not in notes[0], r.data["notes"]
    assert xattrs(target) == {"user.site.note": TAGS["user.site.note"]}


def test_no_xattr_support_is_no_problem(venv_a, monkeypatch):
    """A file system without extended attributes (listxattr: ENOTSUP): the write goes on, no note."""
    def unsupported(*_a, **_kw):
        raise OSError(errno.ENOTSUP, os.strerror(errno.ENOTSUP))

    monkeypatch.setattr(fsio.os, "listxattr", unsupported)
    r = commands.apply.run(venv_a, manifest=MAN, patch_source=fake_patch)
    assert r.data["changed"] and not any("extended attribute" in n for n in r.data["notes"])

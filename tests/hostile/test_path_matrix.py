"""Every path ple4patch reads or writes in a venv x what can be at it: the documented outcome.

`PATHS` is the one list of those paths (docs/failure-modes.md, "Every path in a venv",
shows the same table; `test_doc_lists_every_path` keeps them equal). For each path and each
of `KINDS` (missing, regular, directory, FIFO, symlink inside site-packages, symlink outside,
dangling symlink, unreadable, owned by another user, empty, huge) the test plants that thing
at the path of a venv holding a pinned pristine file, runs `apply` (then `status`), and checks:
the exit code is the documented one (never 1), a refusal is one line naming the path, no run
blocks (a time bound), nothing outside site-packages changes, and what was planted (a file
ple4patch did not write) is still there unless it is ple4patch's own (a pyc, a temp file).
Unreadable and other-owner rows run ple4patch as another user (root reads everything).
"""

from __future__ import annotations

import hashlib
import os
import py_compile
import re
import shutil
import stat
from pathlib import Path

import pytest

import kit
from hkit import NOBODY, as_user, chown_tree
from kit.fakepatch import PRISTINE_A, fake_manifest
from ple4patch.errors import EXIT_ENGINE_NOT_FOUND as E3
from ple4patch.errors import EXIT_MODIFIED as E5
from ple4patch.errors import EXIT_NOT_WRITABLE as E7
from ple4patch.errors import EXIT_OK as OK
from ple4patch.errors import EXIT_USAGE as E2
from ple4patch.paths import LOCAL_PINS_NAME, LOCK_NAME, TEMP_PREFIX

KINDS = ("missing", "regular", "directory", "fifo", "symlink_inside", "symlink_outside", "dangling",
         "unreadable", "other_owner", "empty", "huge")
HUGE = 65 << 20  # over every read limit (sparse: costs no disk)
ANY = None  # not applicable

# role: (where, relative to the venv or "extra" for a file outside it; {kind: apply's exit code})
# `ours`: ple4patch may remove what is planted there (its own kinds of file: pycs, temp files).
PATHS: dict[str, dict] = {
    "target": dict(at="{site}/vllm/models/qwen4_exp/nvidia/ple_layer.py", ours=False, apply={
        "missing": E3, "regular": OK, "directory": E5, "fifo": E5, "symlink_inside": E5,
        "symlink_outside": E5, "dangling": E3, "unreadable": E7, "other_owner": OK, "empty": E5,
        "huge": E5}),
    "backup": dict(at="{site}/vllm/models/qwen4_exp/nvidia/ple_layer.py.bak-pre-ple4", ours=False, apply={
        "missing": OK, "regular": OK, "directory": E5, "fifo": E5, "symlink_inside": E5,
        "symlink_outside": E5, "dangling": E5, "unreadable": E5, "other_owner": OK, "empty": E5,
        "huge": E5}),
    "directory_on_the_way": dict(at="{site}/vllm/models/qwen4_exp", ours=False, apply={
        "missing": E3, "regular": E3, "directory": OK, "fifo": E3, "symlink_inside": E5,
        "symlink_outside": E5, "dangling": E5, "unreadable": E7, "other_owner": OK, "empty": E3,
        "huge": ANY}),
    "record": dict(at="{dist}/RECORD", ours=False, apply={
        "missing": E3, "regular": OK, "directory": E3, "fifo": E3, "symlink_inside": E3,
        "symlink_outside": E3, "dangling": E3, "unreadable": E3, "other_owner": OK, "empty": OK,
        "huge": E3}),
    "metadata": dict(at="{dist}/METADATA", ours=False, apply={k: OK for k in KINDS}),
    "direct_url": dict(at="{dist}/direct_url.json", ours=False, apply={k: OK for k in KINDS}),
    "pyc": dict(at="{site}/vllm/models/qwen4_exp/nvidia/__pycache__/ple_layer.cpython-311.pyc", ours=True,
                apply={k: OK for k in KINDS}),
    "local_pins": dict(at="{site}/" + LOCAL_PINS_NAME, ours=False, apply={k: OK for k in KINDS}),
    "lock": dict(at="{site}/" + LOCK_NAME, ours=False, apply={
        "missing": OK, "regular": OK, "directory": E7, "fifo": E7, "symlink_inside": E7,
        "symlink_outside": E7, "dangling": E7, "unreadable": E7, "other_owner": OK, "empty": OK,
        "huge": OK}),
    "temp_leftover": dict(at="{site}/vllm/models/qwen4_exp/nvidia/" + TEMP_PREFIX + "ple_layer.py-1-ab",
                          ours=True, apply={k: OK for k in KINDS}),
    "set_aside_backup": dict(at="{site}/vllm/models/qwen4_exp/nvidia/ple_layer.py.bak-pre-ple4.stale-0123456789ab",
                             ours=False, apply={k: OK for k in KINDS}),
    "pyvenv_cfg": dict(at="pyvenv.cfg", ours=False, apply={k: OK for k in KINDS}),
    "extra_manifest": dict(at="extra", ours=False, apply={
        "missing": E2, "regular": OK, "directory": E2, "fifo": E2, "symlink_inside": OK,
        "symlink_outside": OK, "dangling": E2, "unreadable": E2, "other_owner": OK, "empty": E2,
        "huge": E2}),
}

AS_OTHER_USER = ("unreadable", "other_owner")


def _regular_bytes(role: str, path: Path, man: Path) -> bytes:
    if role in ("target", "backup", "set_aside_backup"):
        return PRISTINE_A
    if role == "pyc":
        return b""  # compiled below
    if role == "local_pins":
        return fake_manifest(b"another file\n").dumps().encode()
    if role == "lock":
        return b""
    if role == "temp_leftover":
        return b"half a write"
    if role == "extra_manifest":
        return man.read_bytes()
    if role == "direct_url":
        return b'{"url": "file:///wheels/x.whl", "archive_info": {}}'
    return path.read_bytes()  # record, metadata, pyvenv.cfg: what pip / venv wrote


def _resolve(role: str, venv: Path, root: Path) -> Path:
    site = kit.site_packages(venv)
    (dist,) = site.glob("1cat_vllm-*.dist-info")
    at = PATHS[role]["at"]
    if at == "extra":
        return root / "extra-manifest.json"
    return venv / at.format(site=site.relative_to(venv), dist=dist.relative_to(venv))


def plant(role: str, kind: str, venv: Path, root: Path, outside: Path, man: Path) -> Path:
    """Put `kind` at `role`'s path; returns the path."""
    path = _resolve(role, venv, root)
    site = kit.site_packages(venv)
    is_dir_role = role == "directory_on_the_way"
    if role == "extra_manifest":
        shutil.copy(man, path)
    if role == "pyc":
        path.parent.mkdir(exist_ok=True)
        py_compile.compile(str(kit.target_of(venv)), cfile=str(path), doraise=True)
    regular = None if is_dir_role else path.read_bytes() if role == "pyc" else _regular_bytes(role, path, man)
    moved = None
    if os.path.lexists(path):
        if path.is_dir() and not path.is_symlink():
            moved = root / f"moved-{role}"
            shutil.move(str(path), moved)
        else:
            path.unlink()
    if is_dir_role:
        moved = root / f"moved-{role}"

    def put(p: Path, data: bytes | None) -> None:
        if data is None:
            shutil.copytree(moved, p, symlinks=True)
        else:
            p.write_bytes(data)

    if kind == "missing":
        pass
    elif kind == "regular":
        if is_dir_role:
            path.write_bytes(b"a file where a directory belongs\n")
        else:
            put(path, regular)
    elif kind == "directory":
        if is_dir_role:
            put(path, None)
        else:
            path.mkdir()
            (path / "keep").write_bytes(b"someone's\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("symlink_inside", "symlink_outside"):
        where = (site / f".hostile-real-{role}") if kind == "symlink_inside" else (outside / f"real-{role}")
        if role == "extra_manifest" and kind == "symlink_inside":
            where = root / "real-extra.json"
        put(where, regular)
        path.symlink_to(where)
    elif kind == "dangling":
        path.symlink_to(outside / "nothing-here")
    elif kind in ("unreadable", "other_owner"):
        put(path, regular)
    elif kind == "empty":
        if is_dir_role:
            path.mkdir()
        else:
            path.write_bytes(b"")
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(HUGE)
    if moved is not None and os.path.exists(moved) and not is_dir_role:
        shutil.rmtree(moved)
    return path


def _state_outside(venv: Path, root: Path, outside: Path) -> str:
    """A hash of everything but site-packages: the venv's other files and the outside folder."""
    h = hashlib.sha256()
    site = kit.site_packages(venv)
    for base in (venv, outside):
        for dirpath, dirnames, files in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if Path(dirpath, d) != site)
            for n in sorted(files):
                p = Path(dirpath, n)
                st = os.lstat(p)
                h.update(f"{p}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _what(path: Path) -> tuple:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ("absent",)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as fh:
            return ("file", hashlib.sha256(fh.read(1 << 20)).hexdigest(), st.st_size)
    return (stat.S_IFMT(st.st_mode),)


CASES = [(role, kind) for role in PATHS for kind in KINDS if PATHS[role]["apply"][kind] is not ANY]


@pytest.mark.parametrize(("role", "kind"), CASES, ids=[f"{r}-{k}" for r, k in CASES])
def test_path_matrix(role, kind, hvenv, hroot, outside, hman, cli_in, need_root):
    man = hroot / "manifest.json"
    shutil.copy(hman, man)
    path = plant(role, kind, hvenv, hroot, outside, man)
    expected = PATHS[role]["apply"][kind]
    manifests = [man] if role != "extra_manifest" else [path]
    if kind in AS_OTHER_USER:
        chown_tree(hroot, NOBODY)
        if kind == "unreadable":
            os.chmod(path, 0o000)
        else:
            os.chown(path, 0, 0, follow_symlinks=False)
    planted = _what(path)
    before_outside = _state_outside(hvenv, hroot, outside)

    if kind in AS_OTHER_USER:
        proc = as_user(NOBODY, "apply", hvenv, manifests=manifests)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
        status = as_user(NOBODY, "status", hvenv, manifests=manifests).returncode
    else:
        code, out, err = cli_in("apply", hvenv, manifests=manifests)
        status = cli_in("status", hvenv, manifests=manifests)[0]

    assert code == expected, (code, out, err)
    assert status != 1 and code != 1
    if code != OK:
        err = kit.one_message(err, "ple4patch apply: error: ")
        named = set().union(*(kit.names_of(p, hvenv) for p in (path, path.parent, kit.target_of(hvenv))))
        assert any(n in err for n in named) or role in ("record", "extra_manifest"), err
    assert _state_outside(hvenv, hroot, outside) == before_outside, "something outside site-packages changed"
    if not PATHS[role]["ours"] and role not in ("target",) and not (role == "lock" and kind == "missing"):
        if not (role == "backup" and kind == "missing"):
            assert _what(path) == planted, f"{path} was changed or removed: ple4patch did not write it"
    if code == OK:
        assert kit.target_of(hvenv).read_bytes() != PRISTINE_A, "apply said 0 but did not patch"


def test_doc_lists_every_path():
    doc = (kit.REPO / "docs" / "failure-modes.md").read_text()
    section = doc.split("## Every path in a venv", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|[^|]*\|[^|]*\| ([^|]*) \|", section,
                                                          re.MULTILINE)}
    assert set(rows) == set(PATHS), (set(rows) ^ set(PATHS))
    for role, cell in rows.items():  # the doc's exit codes are the ones tested
        want = [PATHS[role]["apply"][k] for k in KINDS]
        if cell.startswith("0 in every case"):
            assert want == [OK] * len(KINDS), role
        else:
            codes = [re.match(r"\s*(\d+|-)", c).group(1) for c in cell.split(" / ")]
            assert codes == ["-" if w is ANY else str(w) for w in want], (role, codes)

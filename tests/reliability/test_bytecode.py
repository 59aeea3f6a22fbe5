"""Stale bytecode: after apply and after revert a fresh interpreter runs the new source.

An unchecked-hash .pyc (reproducible and distro builds ship them) is used by the
interpreter without looking at the source, so one left from the old bytes would keep
the old code running. Checked here with every invalidation mode and optimisation level,
by executing the module in the venv's own interpreter (the tiny fake engine imports
nothing), and for the stand-in engine with the real transform through the importer's own
`get_code` (its imports need torch and the engine, so it is compiled, not executed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import subprocess

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest, fake_patch
from ple4patch import bytecode, commands
from ple4patch.sentinel import PATCH_ID

MAN = fake_manifest(PRISTINE_A)
MODES = [py_compile.PycInvalidationMode.UNCHECKED_HASH, py_compile.PycInvalidationMode.CHECKED_HASH,
         py_compile.PycInvalidationMode.TIMESTAMP]
RUN = ("import json, sys, vllm.models.qwen4_exp.nvidia.ple_layer as m; "
       "print(json.dumps([m.X, getattr(m, 'PLE4_FAKE_PATCH', None), sys.flags.optimize]))")


def compile_all(target, mode) -> list:
    """Bytecode of the target's current bytes at optimisation levels 0, 1, 2 (like compileall -o)."""
    out = []
    for opt in (0, 1, 2):
        pyc = importlib.util.cache_from_source(str(target), optimization=opt or "")
        py_compile.compile(str(target), cfile=pyc, doraise=True, optimize=opt, invalidation_mode=mode)
        out.append(pyc)
    return out


def run_module(venv, opt: int) -> list:
    flags = ["-" + "O" * opt] if opt else []
    proc = subprocess.run([str(kit.venv_python(venv)), *flags, "-c", RUN], capture_output=True, text=True,
                          env=kit.cli_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name.lower())
def test_fresh_interpreter_runs_the_new_source(mode, fake_tpl, tmp_path):
    venv = kit.clone(fake_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    compile_all(target, mode)
    for opt in (0, 1, 2):
        assert run_module(venv, opt) == [1, None, opt]

    assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]
    for opt in (0, 1, 2):
        assert run_module(venv, opt) == [1, PATCH_ID, opt], f"stale bytecode after apply (-O x{opt})"

    compile_all(target, mode)  # the engine's own install step compiles the patched file
    assert commands.revert.run(venv, manifest=MAN).data["restored"]
    for opt in (0, 1, 2):
        assert run_module(venv, opt) == [1, None, opt], f"stale bytecode after revert (-O x{opt})"


def test_the_check_sees_stale_bytecode(fake_tpl, tmp_path):
    """Negative control: an unchecked pyc of other bytes really is run in place of the source."""
    venv = kit.clone(fake_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    st = os.stat(target)
    target.write_bytes(fake_patch(PRISTINE_A.decode()).encode())
    kit.compile_unchecked(target)
    target.write_bytes(PRISTINE_A)  # the file changes, its unchecked pyc stays
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run_module(venv, 0)[1] == PATCH_ID
    with pytest.raises(AssertionError, match="stale bytecode"):
        kit.assert_imports_current_source(venv)


def test_real_transform_standin(pinned, standin_tpl, tmp_path):
    man, pin = pinned
    venv = kit.clone(standin_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    env = kit.env_with([man])
    kit.compile_unchecked(target)
    kit.assert_imports_current_source(venv)
    assert kit.run_real("apply", venv, env=env).returncode == 0
    assert kit.sha(target) == pin.patched_sha256
    kit.assert_imports_current_source(venv)
    kit.compile_unchecked(target)
    assert kit.run_real("revert", venv, env=env).returncode == 0
    assert kit.sha(target) == pin.pristine_sha256
    kit.assert_imports_current_source(venv)


def test_clean_stale_pycache_keeps_only_provably_fresh_bytecode(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    target = pkg / "ple_layer.py"
    target.write_bytes(b"X = 1\n")
    cache = pkg / "__pycache__"

    def make(mode, name, source=b"X = 1\n"):
        src = tmp_path / "src.py"
        src.write_bytes(source)
        st = os.stat(target)
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
        py_compile.compile(str(src), cfile=str(cache / name), doraise=True, invalidation_mode=mode)

    U, C, T = MODES
    make(U, "ple_layer.cpython-311.pyc")  # fresh unchecked: kept
    make(C, "ple_layer.cpython-311.opt-1.pyc")  # fresh checked: kept
    make(T, "ple_layer.cpython-311.opt-2.pyc")  # fresh timestamp: kept
    make(U, "ple_layer.cpython-310.pyc", b"X = 2\n")  # stale unchecked: removed
    make(T, "ple_layer.cpython-39.pyc", b"X = 22\n")  # stale timestamp (size differs): removed
    foreign = cache / "ple_layer.cpython-399.pyc"  # another Python's unchecked pyc: cannot be checked
    foreign.write_bytes(b"\x00\x00\r\n" + (1).to_bytes(4, "little") + b"\x00" * 8 + b"code")
    (cache / "other.cpython-311.pyc").write_bytes(b"not ours")

    removed = {p.name for p in bytecode.clean_stale_pycache(target)}
    assert removed == {"ple_layer.cpython-310.pyc", "ple_layer.cpython-39.pyc", "ple_layer.cpython-399.pyc"}
    assert sorted(p.name for p in cache.iterdir()) == [
        "other.cpython-311.pyc", "ple_layer.cpython-311.opt-1.pyc", "ple_layer.cpython-311.opt-2.pyc",
        "ple_layer.cpython-311.pyc"]

"""Helpers of the reliability tests (tests/test_reliability_*.py).

- Template venvs: an engine is installed by pip once per session into a template venv;
  each test gets a copy (`clone`), which is what pip would have left (same files, modes,
  mtimes, RECORD; the venv's bin/python symlink is kept as a symlink).
- `tree_hash(venv)`: one sha256 over every path, mode, symlink target and file content of
  site-packages (the empty lock file ple4patch leaves is skipped), for "nothing changed".
- `fake_cli(...)`: the real CLI in a subprocess (real locking, fault points, exit codes,
  JSON) with the tiny deterministic `fakepatch.fake_patch` as the transform, for tests
  that run ple4patch hundreds of times (races). `FAKE_MANIFEST` pins PRISTINE_A/B for it.
- `run_real(...)`: the real CLI (`python -m ple4patch`) with the real transform.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import enginekit
from enginekit import TEST_MANIFEST, standin_bytes  # one copy, in enginekit (rk.standin_bytes() works)
from fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest
from ple4patch import fsio
from ple4patch import manifest as m
from ple4patch.state import TEMP_PREFIX, backup_path

TESTS = Path(__file__).resolve().parent
DRIVER = TESTS / "reliability_driver.py"

_templates: dict[tuple, Path] = {}


_pins: dict[str, tuple[Path, m.Pin]] = {}


def standin_manifest(base: Path) -> tuple[Path, m.Pin]:
    """A manifest file pinning the stand-in to what the current transform makes of it.

    Made once per session, so these tests do not depend on the checked-in test manifest
    being re-pinned (test_cli checks that); the pin is the same shape `make pin` writes.
    """
    if str(base) not in _pins:
        from ple4patch.sentinel import PATCH_ID
        from ple4patch.transform import patch_source

        data = standin_bytes()
        out = patch_source(data.decode("utf-8")).encode("utf-8")
        pin = m.Pin(
            pristine_sha256=enginekit.sha256_hex(data),
            patched_sha256=enginekit.sha256_hex(out),
            patch_id=PATCH_ID,
            label="stand-in engine (reliability tests, pinned at session start)",
            engine_versions="",
            size=len(data),
            source="reliability-tests",
        )
        man = m.Manifest(sources=["reliability-tests"])
        man.add(pin)
        path = base / "standin_session_manifest.json"
        path.write_text(man.dumps())
        _pins[str(base)] = (path, pin)
    return _pins[str(base)]


def template(base: Path, wheelhouse, key: str, *wheels: Path) -> Path:
    """A venv with `wheels` installed by pip, made once per session under `base`."""
    k = (str(base), key)
    if k not in _templates:
        venv = base / "templates" / key
        venv.parent.mkdir(parents=True, exist_ok=True)
        enginekit.make_venv(venv)
        if wheels:
            enginekit.install(venv, *wheels)
        _templates[k] = venv
    return _templates[k]


def clone(template_venv: Path, dest: Path) -> Path:
    shutil.copytree(template_venv, dest, symlinks=True)
    return dest


def tree_hash(venv: Path, *, skip_lock: bool = True) -> str:
    """sha256 of site-packages: every relative path, its type and mode, and its bytes."""
    site = enginekit.site_packages(venv)
    h = hashlib.sha256()
    for root, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, site)
            if skip_lock and name == fsio.LOCK_NAME:
                assert os.path.getsize(p) == 0, "the lock file is always empty"
                continue
            st = os.lstat(p)
            h.update(f"{rel}\0{stat.S_IFMT(st.st_mode)}\0{stat.S_IMODE(st.st_mode)}\0".encode("utf-8", "surrogateescape"))
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(p).encode("utf-8", "surrogateescape"))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def temps(target: Path) -> list[Path]:
    return sorted(target.parent.glob(TEMP_PREFIX + "*"))


def pycs(target: Path) -> list[Path]:
    return sorted((target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"))


def sha(path: Path) -> str | None:
    try:
        return enginekit.sha256_hex(path.read_bytes())
    except FileNotFoundError:
        return None


def backup_sha(target: Path) -> str | None:
    return sha(backup_path(target))


def fake_manifest_file(directory: Path) -> Path:
    path = directory / "fake_manifest.json"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(fake_manifest(PRISTINE_A, PRISTINE_B).dumps())
    return path


def env_with(manifests: list[Path] = (), **extra: str) -> dict[str, str]:
    env = enginekit.cli_env(list(manifests))
    env.pop(fsio.LOCK_TIMEOUT_ENV, None)
    env.update(extra)
    return env


def fake_cmd(*args) -> list[str]:
    return [sys.executable, str(DRIVER), *map(str, args)]


def fake_cli(*args, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(fake_cmd(*args), capture_output=True, text=True, errors="surrogateescape", env=env,
                          timeout=timeout)


def run_real(*args, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return enginekit.run_cli(*args, env=env, timeout=timeout)


def json_of(proc: subprocess.CompletedProcess) -> dict:
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"not JSON (rc {proc.returncode}): {proc.stdout!r} {proc.stderr!r}") from None
    assert data["exit_code"] == proc.returncode, (data, proc.returncode)
    return data


def one_line_error(proc: subprocess.CompletedProcess, command: str) -> str:
    """The text-mode error: exactly one line on stderr, nothing on stdout."""
    err = proc.stderr
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(f"ple4patch {command}: error: "), err
    assert proc.stdout == "", proc.stdout
    return err.strip()


def compile_unchecked(target: Path) -> Path:
    """Put an unchecked-hash .pyc of the target's current bytes where the interpreter looks."""
    import importlib.util
    import py_compile

    pyc = Path(importlib.util.cache_from_source(str(target)))
    py_compile.compile(str(target), cfile=str(pyc), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return pyc


_LOADED_CODE = r"""
import importlib.util, json, sys
name = "vllm.models.qwen4_exp.nvidia.ple_layer"
spec = importlib.util.find_spec(name)
code = spec.loader.get_code(name)        # what `import` executes (bytecode cache included)
with open(spec.origin, "rb") as fh:
    fresh = compile(fh.read(), spec.origin, "exec", dont_inherit=True)
print(json.dumps({"origin": spec.origin, "current": code == fresh}))
"""


def assert_imports_current_source(venv: Path) -> None:
    """A fresh interpreter of the venv would run exactly the target's current source."""
    proc = subprocess.run([str(enginekit.venv_python(venv)), "-c", _LOADED_CODE], capture_output=True,
                          text=True, env=enginekit.cli_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["origin"] == str(enginekit.target_of(venv))
    assert data["current"], "stale bytecode: the interpreter would not run the file's current source"


def extra_manifests() -> list[Path]:
    """The session's stand-in manifest (after `standin_manifest` made it)."""
    assert _pins, "use the `pinned` fixture first"
    return [path for path, _pin in _pins.values()]

"""Venvs for the tests: the session's wheelhouse, template venvs and their clones, and what
to compare before and after a command (site-packages snapshots and hashes, bytecode).

Template venvs: an engine is installed by pip once per session into a template venv; each
test gets a copy (`clone`), which is what pip would have left (same files, modes, mtimes,
RECORD; the venv's bin/python symlink is kept as a symlink).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

from ple4patch.hashing import sha256_hex
from ple4patch.paths import CONFIG_REL, LOCK_NAME, POLICY_REL, TARGET_REL, TEMP_PREFIX, backup_path, pycs  # noqa: F401 (pycs: kit API)
from tools.engine_files import STANDIN_DIR, standin_file
from tools.throwaway import build_wheel, cli_env, install, make_venv, site_packages
from tools.throwaway import target_of, venv_python


class Wheelhouse:
    """Real wheels built once per session: `wheel(files, name=, version=)`, `engine(data)` (a
    1cat-vllm wheel whose only module is the target), `editable(data)` (PEP 660)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[tuple, Path] = {}

    def wheel(self, files: dict[str, bytes], *, name: str = "1cat-vllm", version: str = "1.5.1") -> Path:
        key = ("wheel", name, version, tuple(sorted((k, sha256_hex(v)) for k, v in files.items())))
        if key not in self._cache:
            self._cache[key] = build_wheel(self.root, files, name=name, version=version)
        return self._cache[key]

    def engine(self, data: bytes, *, version: str = "1.5.1", name: str = "1cat-vllm") -> Path:
        return self.wheel({TARGET_REL: data}, name=name, version=version)

    def engine_set(self, layer: bytes, policy: bytes, *, version: str = "1.5.2") -> Path:
        """A 1cat-vllm wheel holding the PLE layer and the start-up policy file (a two-file set)."""
        return self.wheel({TARGET_REL: layer, POLICY_REL: policy}, version=version)

    def engine_config_era(self, layer: bytes, config: bytes, *, version: str = "1.5.0") -> Path:
        """A 1cat-vllm wheel of the era before the policy file: the PLE layer (the set, alone) and
        a ``vllm/config/vllm.py`` that places the PLE table by itself."""
        return self.wheel({TARGET_REL: layer, CONFIG_REL: config}, version=version)

    def engine_set_of(self, kind: str) -> Path:
        """The stand-in engine of a set kind (`pins.SET_KINDS`): "policy" (`engine_set`) or
        "config" (`engine_config_era`)."""
        if kind == "policy":
            return self.engine_set(standin_bytes(), standin_policy_bytes())
        assert kind == "config", kind
        return self.engine_config_era(standin_bytes(), config_era_bytes())

    def editable(self, data: bytes, *, version: str = "1.5.1") -> Path:
        key = ("editable", version, sha256_hex(data))
        if key not in self._cache:
            self._cache[key] = build_wheel(self.root, {TARGET_REL: data}, version=version, editable=True)
        return self._cache[key]


def standin_bytes() -> bytes:
    """The stand-in engine's target bytes (skips the calling test when it is absent)."""
    path = standin_file()
    if path is None:
        import pytest

        pytest.skip(f"the stand-in engine is not there yet ({STANDIN_DIR})")
    return path.read_bytes()


def standin_policy_bytes() -> bytes:
    """The stand-in engine's start-up policy file (mirrors 1Cat-vLLM 51c0f972's runtime_defaults.py)."""
    path = STANDIN_DIR / POLICY_REL
    if not path.is_file():
        import pytest

        pytest.skip(f"the stand-in engine has no policy file ({path})")
    return path.read_bytes()


CONFIG_ERA_FILE = STANDIN_DIR.parent / "config_era" / CONFIG_REL


def config_era_bytes() -> bytes:
    """The stand-in ``vllm/config/vllm.py`` of the era before the policy file (its own text,
    shaped like ChainZeaxion/1Cat-vLLM ebeb346a's: tests/fixtures/config_era)."""
    return CONFIG_ERA_FILE.read_bytes()


_templates: dict[tuple, Path] = {}


def template(base: Path, wheelhouse, key: str, *wheels: Path) -> Path:
    """A venv with `wheels` installed by pip, made once per session under `base`."""
    k = (str(base), key)
    if k not in _templates:
        venv = base / "templates" / key
        venv.parent.mkdir(parents=True, exist_ok=True)
        make_venv(venv)
        if wheels:
            install(venv, *wheels)
        _templates[k] = venv
    return _templates[k]


def clone(template_venv: Path, dest: Path) -> Path:
    shutil.copytree(template_venv, dest, symlinks=True)
    return dest


def site_snapshot(venv: Path, *, pycache: bool = True) -> dict[str, bytes]:
    """Every file in the venv's site-packages but the lock file: {path relative to venv: bytes}."""
    out = {}
    for root, _dirs, files in os.walk(site_packages(venv)):
        if not pycache and os.path.basename(root) == "__pycache__":
            continue
        for f in files:
            if f == LOCK_NAME:
                continue
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, venv)] = fh.read()
    return out


def tree_hash(venv: Path, *, skip_lock: bool = True) -> str:
    """sha256 of site-packages: every relative path, its type and mode, and its bytes (the
    empty lock file ple4patch leaves is skipped), for "nothing changed"."""
    site = site_packages(venv)
    h = hashlib.sha256()
    for root, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, site)
            if skip_lock and name == LOCK_NAME:
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
    """Temp files beside the target."""
    return sorted(target.parent.glob(TEMP_PREFIX + "*"))


def sha(path: Path) -> str | None:
    """The file's sha256; None when it is absent (any other error raises)."""
    try:
        return sha256_hex(path.read_bytes())
    except FileNotFoundError:
        return None


def backup_sha(target: Path) -> str | None:
    return sha(backup_path(target))


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
    proc = subprocess.run([str(venv_python(venv)), "-c", _LOADED_CODE], capture_output=True,
                          text=True, env=cli_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["origin"] == str(target_of(venv))
    assert data["current"], "stale bytecode: the interpreter would not run the file's current source"

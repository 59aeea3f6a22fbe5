"""Build stand-in 1cat-vllm wheels and install them into throw-away venvs.

Reusable by any test (fixtures in conftest.py wrap these):

- `build_wheel(out_dir, files, name=, version=)`: a real wheel, built by pip +
  setuptools (`pip wheel --no-build-isolation --no-deps`), holding `files`
  ({relative path: bytes}; `__init__.py` files are added for every package).
- `build_editable_wheel(...)`: the PEP 660 editable wheel setuptools builds for
  `pip install -e` (a `__editable__.*.pth`/finder, no target file).
- `make_venv(path)`: `python -m venv --without-pip` (fast).
- `install(venv, wheel)`: `python -m pip --python <venv>/bin/python install
  --no-deps --no-index <wheel>`, so dist-info and RECORD are real pip output.
- `shared_engines()`: the real engine files in ../shared/engines (INDEX.md rows);
  empty when ../shared is absent.
- `run_cli(*args, env=)`: `python -m ple4patch ...` in a subprocess.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_ENGINES = REPO.parent / "shared" / "engines"
STANDIN_DIR = REPO / "tests" / "fixtures" / "standin_engine"
TEST_MANIFEST = REPO / "tests" / "fixtures" / "standin_manifest.json"  # pins the stand-in
LOCK_NAME = ".ple4patch.lock"
TARGET_REL = "vllm/models/qwen4_exp/nvidia/ple_layer.py"
PY = sys.executable


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(
            f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def _write_project(root: Path, files: dict[str, bytes], name: str, version: str) -> Path:
    proj = root / f"src-{re.sub(r'[^A-Za-z0-9]+', '_', name)}-{secrets.token_hex(4)}"
    proj.mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "{version}"
            description = "stand-in engine for ple4patch tests"

            [tool.setuptools.packages.find]
            include = ["vllm*"]
            """
        )
    )
    for rel, data in files.items():
        path = proj / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        # every directory up to the top package is a regular package
        for parent in Path(rel).parents:
            if str(parent) == ".":
                break
            init = proj / parent / "__init__.py"
            if not init.exists():
                init.write_text("")
    return proj


def build_wheel(
    out_dir: Path, files: dict[str, bytes], *, name: str = "1cat-vllm", version: str = "1.5.1"
) -> Path:
    """A wheel of a stand-in engine (real setuptools + pip output)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    proj = _write_project(out_dir / "projects", files, name, version)
    dest = out_dir / proj.name
    _run([PY, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index",
          "-w", str(dest), str(proj)], cwd=out_dir)
    (wheel,) = dest.glob("*.whl")
    return wheel


def build_editable_wheel(
    out_dir: Path, files: dict[str, bytes], *, name: str = "1cat-vllm", version: str = "1.5.1"
) -> Path:
    """The PEP 660 editable wheel `pip install -e` would install (setuptools' build_editable)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    proj = _write_project(out_dir / "projects", files, name, version)
    dest = out_dir / (proj.name + "-editable")
    dest.mkdir()
    _run([PY, "-c", f"import setuptools.build_meta as b; b.build_editable({str(dest)!r})"], cwd=proj)
    (wheel,) = dest.glob("*.whl")
    return wheel


def make_venv(path: Path) -> Path:
    _run([PY, "-m", "venv", "--without-pip", str(path)])
    return path


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install(venv: Path, *wheels: Path) -> None:
    _run([PY, "-m", "pip", "--python", str(venv_python(venv)), "install", "-q", "--no-deps",
          "--no-index", *map(str, wheels)])


def site_packages(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return site


def target_of(venv: Path) -> Path:
    return site_packages(venv) / TARGET_REL


@dataclass(frozen=True)
class SharedEngine:
    folder: str
    commit: str
    era: str
    size: int
    sha256: str
    path: Path

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()


def parse_index(text: str, base: Path) -> list[SharedEngine]:
    """The rows of ../shared/engines/INDEX.md (folder | commit | era | bytes | sha256)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[0-9a-f]{64}", cells[4]):
            continue
        folder, commit, era, size, sha = cells
        rows.append(
            SharedEngine(folder, commit.split()[0], era, int(size), sha, base / folder / "ple_layer.py")
        )
    return rows


def shared_engines(base: Path = SHARED_ENGINES) -> list[SharedEngine]:
    index = base / "INDEX.md"
    if not index.is_file():
        return []
    return parse_index(index.read_text(encoding="utf-8"), base)


def standin_file() -> Path | None:
    path = STANDIN_DIR / TARGET_REL
    return path if path.is_file() else None


def standin_bytes() -> bytes:
    """The stand-in engine's target bytes (skips the calling test when it is absent)."""
    path = standin_file()
    if path is None:
        import pytest

        pytest.skip("the stand-in engine is not there yet")
    return path.read_bytes()


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


def cli_env(extra_manifests: list[Path] = (), **env: str) -> dict[str, str]:
    out = dict(os.environ)
    out.pop("VIRTUAL_ENV", None)
    out.pop("PLE4PATCH_FAULT", None)
    if extra_manifests:
        out["PLE4PATCH_EXTRA_MANIFESTS"] = os.pathsep.join(map(str, extra_manifests))
    else:
        out.pop("PLE4PATCH_EXTRA_MANIFESTS", None)
    out.update(env)
    return out


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m ple4patch ARGS` in a subprocess (not raising on a non-zero exit)."""
    return subprocess.run(
        [PY, "-m", "ple4patch", *map(str, args)],
        capture_output=True,
        text=True,
        env=env if env is not None else cli_env(),
        cwd=REPO,
        timeout=timeout,
    )

"""Throw-away engine installs: real wheels of stand-in engines, venvs, pip installs, and
the environment to run `ple4patch` against them (used by the demo, the tests, the benchmarks).

- `build_wheel(out_dir, files, name=, version=)`: a real wheel, built by pip +
  setuptools (`pip wheel --no-build-isolation --no-deps`), holding `files`
  ({relative path: bytes}; `__init__.py` files are added for every package).
- `build_wheel(..., editable=True)`: the PEP 660 editable wheel setuptools builds for
  `pip install -e` (a `__editable__.*.pth`/finder, no target file).
- `make_venv(path)`: `python -m venv --without-pip` (fast).
- `install(venv, wheel)`: `python -m pip --python <venv>/bin/python install
  --no-deps --no-index <wheel>`, so dist-info and RECORD are real pip output.
- `cli_env(extra_manifests, **env)`: this environment without `$VIRTUAL_ENV` and fault
  points, with `$PLE4PATCH_EXTRA_MANIFESTS` set to `extra_manifests`.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

from ple4patch.paths import TARGET_REL

PY = sys.executable


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
    out_dir: Path, files: dict[str, bytes], *, name: str = "1cat-vllm", version: str = "1.5.1",
    editable: bool = False,
) -> Path:
    """A wheel of a stand-in engine (real setuptools + pip output); `editable`: the PEP 660
    editable wheel `pip install -e` would install (setuptools' build_editable)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    proj = _write_project(out_dir / "projects", files, name, version)
    if editable:
        dest = out_dir / (proj.name + "-editable")
        dest.mkdir()
        _run([PY, "-c", f"import setuptools.build_meta as b; b.build_editable({str(dest)!r})"], cwd=proj)
    else:
        dest = out_dir / proj.name
        _run([PY, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "--no-index",
              "-w", str(dest), str(proj)], cwd=out_dir)
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

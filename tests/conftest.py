"""Shared fixtures: stand-in engine wheels (built once per session) and throw-away venvs.

- `wheelhouse` (session): `wheelhouse.wheel(files, name=, version=)` builds (once) and
  returns a real wheel; `wheelhouse.engine(data, version=)` is the common case of a
  1cat-vllm wheel whose only module is the target with `data` as its bytes;
  `wheelhouse.editable(data)` the PEP 660 editable wheel.
- `new_venv`: factory, `new_venv(name="venv")` -> an empty venv (no pip) under tmp_path.
- `engine_venv`: factory, `engine_venv(*wheels, name="venv")` -> a new venv with the
  wheels installed by pip.
- `shared_engine` (parametrised, see `shared_engine_params`): one real engine file from
  ../shared/engines per test (skipped cleanly when ../shared is absent).

The helpers behind them are in tests/kit.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kit
from kit import Wheelhouse
from run_guards import pytest_sessionfinish, pytest_sessionstart  # noqa: F401 (hooks)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Wheelhouse:
    return Wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture
def new_venv(tmp_path: Path):
    def make(name: str = "venv") -> Path:
        return kit.make_venv(tmp_path / name)

    return make


@pytest.fixture
def engine_venv(new_venv):
    def make(*wheels: Path, name: str = "venv") -> Path:
        venv = new_venv(name)
        if wheels:
            kit.install(venv, *wheels)
        return venv

    return make


def shared_engine_params() -> list:
    rows = kit.shared_engines()
    if not rows:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/engines is absent"), id="no-shared")]
    return [pytest.param(row, id=row.folder) for row in rows]


@pytest.fixture(params=shared_engine_params())
def shared_engine(request) -> kit.SharedEngine:
    return request.param

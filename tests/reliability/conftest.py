"""Fixtures of the reliability tests (crash, input, race, bytecode, upgrade).

Template venvs are made once per session (pip installs an engine into each) and every test
works on a copy (`kit.clone`):

- `fake_tpl`: 1cat-vllm 1.5.0 holding PRISTINE_A, for the fake transform; `venv` a copy.
- `fake_man`: the manifest file pinning PRISTINE_A/B under the fake transform.
- `standin_tpl`: 1cat-vllm 1.5.1 holding the stand-in engine, for the real transform;
  `pinned` (manifest file, pin) pins it to what the current transform makes of it, `pin`
  is that pin, `patched_tpl` a copy patched by the real CLI.
"""

from __future__ import annotations

import pytest

import kit
from kit.fakepatch import PRISTINE_A


@pytest.fixture(scope="session")
def fake_tpl(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "race-a",
                        wheelhouse.engine(PRISTINE_A, version="1.5.0"))


@pytest.fixture
def venv(fake_tpl, tmp_path):
    return kit.clone(fake_tpl, tmp_path / "venv")


@pytest.fixture(scope="session")
def fake_man(tmp_path_factory):
    return kit.fake_manifest_file(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def pinned(tmp_path_factory):
    """(manifest file, pin) of the stand-in under the current transform."""
    return kit.standin_manifest(tmp_path_factory.getbasetemp())


@pytest.fixture
def pin(pinned):
    return pinned[1]


@pytest.fixture(scope="session")
def standin_tpl(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "crash-standin",
                        wheelhouse.engine(kit.standin_bytes(), version="1.5.1"))


@pytest.fixture(scope="session")
def patched_tpl(standin_tpl, pinned, tmp_path_factory):
    venv = kit.clone(standin_tpl, tmp_path_factory.mktemp("crash") / "patched")
    proc = kit.run_real("apply", venv, env=kit.env_with([pinned[0]]))
    assert proc.returncode == 0, proc.stderr
    return venv

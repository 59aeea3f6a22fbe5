"""Fixtures of the hostile-environment tests: what is at a path, what is in a file.

- `hvenv`: a copy of a template venv holding 1cat-vllm 1.5.0 with PRISTINE_A (the fake
  transform's file), in a directory that another user can enter (`/tmp/ple4-hostile-*`,
  mode 0755), so a test can run ple4patch as that user (`as_user`).
- `hman`: the manifest file pinning PRISTINE_A/B under the fake transform.
- `cli_in`: the real CLI entry point in this process, with the fake transform (for the layer,
  the start-up policy file and vllm/config/vllm.py), a time bound (SIGALRM: a hang fails the test instead of
  stalling the run), and the venv's exit code, stdout and stderr.
- `as_user(uid, *args)`: the real CLI with the fake transform in a child that runs as `uid`
  (`setpriv`), for ownership and permission cases that root cannot see.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_patch
from ple4patch import cli, fsio, plan

from hkit import time_bound  # noqa: E402


@pytest.fixture(scope="session")
def htpl(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "hostile-a",
                        wheelhouse.engine(PRISTINE_A, version="1.5.0"))


@pytest.fixture(scope="session")
def hman(tmp_path_factory):
    return kit.fake_manifest_file(tmp_path_factory.getbasetemp())


@pytest.fixture
def hroot():
    """A directory others can enter (pytest's tmp_path is 0700 for root)."""
    root = Path(tempfile.mkdtemp(prefix="ple4-hostile-", dir="/tmp"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def hvenv(htpl, hroot):
    return kit.clone(htpl, hroot / "venv")


@pytest.fixture
def outside(hroot):
    d = hroot / "outside"
    d.mkdir()
    (d / "precious.txt").write_bytes(b"not ple4patch's\n")
    return d


@pytest.fixture
def cli_in(monkeypatch, capsys, hman):
    """cli_in(*args, manifests=[hman]) -> (exit code, stdout, stderr) of the real CLI in-process."""

    def run(*args, manifests=None, env=None):
        monkeypatch.setattr(plan, "default_patch_source", lambda: fake_patch)
        monkeypatch.setattr(plan, "default_policy_patch_source", lambda: fake_patch)
        monkeypatch.setattr(plan, "default_config_patch_source", lambda: fake_patch)
        mans = [hman] if manifests is None else manifests
        if mans:
            monkeypatch.setenv("PLE4PATCH_EXTRA_MANIFESTS", os.pathsep.join(map(str, mans)))
        else:
            monkeypatch.delenv("PLE4PATCH_EXTRA_MANIFESTS", raising=False)
        monkeypatch.delenv("PLE4PATCH_FAULT", raising=False)
        monkeypatch.delenv("VIRTUAL_ENV", raising=False)
        monkeypatch.setenv(fsio.LOCK_TIMEOUT_ENV, "2")
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        with time_bound(), pytest.raises(SystemExit) as info:
            cli.main([str(a) for a in args], prog_name="ple4patch")
        out = capsys.readouterr()
        return info.value.code, out.out, out.err

    return run


@pytest.fixture
def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root to make files of another owner (runs as root in CI)")

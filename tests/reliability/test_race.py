"""Races: concurrent ple4patch processes on one venv, and a lock held too long.

The processes are the real CLI (locking, writes, JSON, exit codes) with the tiny test
transform (`reliability_driver.py`), so twenty rounds stay fast; one round with the real
transform shows the same with libcst running under the lock. Every process of a round is
started first and released at the same instant.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import subprocess
import time
from pathlib import Path

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_manifest, fake_patch
from ple4patch import commands
from ple4patch import manifest as m
from ple4patch.errors import EXIT_LOCK_TIMEOUT
from ple4patch.fsio import LOCK_TIMEOUT_ENV
from ple4patch.paths import LOCK_NAME, backup_path

ROUNDS = 20
PATCHED_A = fake_patch(PRISTINE_A.decode()).encode()
MAN = fake_manifest(PRISTINE_A)


def verify_then_revert(venv) -> None:
    """In this process (same code as the CLI's): the result verifies, then back to pristine."""
    assert commands.verify.run(venv, manifest=MAN).exit_code == 0
    r = commands.revert.run(venv, manifest=MAN)
    assert r.data["restored"] is True


_barriers = itertools.count()


def race(cmds: list[list[str]], env: dict, tmp: Path) -> list[subprocess.CompletedProcess]:
    """Start every command, release them all at once when all are ready, wait for all."""
    barrier = tmp / f"barrier-{next(_barriers)}"
    barrier.mkdir()
    env = {**env, "PLE4_TEST_BARRIER": str(barrier)}
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for c in cmds]
    barrier_ready = [c for c in cmds if str(kit.cli.FAKE_TRANSFORM_CLI) in c]
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready-*"))) < len(barrier_ready) and time.monotonic() < deadline:
        time.sleep(0.002)
    (barrier / "go").touch()
    out = []
    for p, c in zip(procs, cmds):
        stdout, stderr = p.communicate(timeout=60)
        out.append(subprocess.CompletedProcess(c, p.returncode, stdout, stderr))
    return out


def state_of(venv, man) -> tuple[str, str]:
    r = commands.status.run(venv, manifest=m.load([man], use_env=False))
    return r.data["state"], r.data["backup"]["state"]


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_applies_exactly_one_writes(n, fake_tpl, fake_man, tmp_path):
    venv = kit.clone(fake_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    env = kit.env_with([fake_man], **{LOCK_TIMEOUT_ENV: "30"})
    for round_ in range(ROUNDS):
        results = race([kit.fake_cmd("apply", venv, "--json")] * n, env, tmp_path)
        datas = [kit.json_of(p) for p in results]
        assert [p.returncode for p in results] == [0] * n, [p.stderr for p in results]
        assert sorted(d["changed"] for d in datas) == [False] * (n - 1) + [True], (round_, datas)
        assert all(d["state"] == "patched" for d in datas)
        assert target.read_bytes() == PATCHED_A and backup_path(target).read_bytes() == PRISTINE_A
        assert kit.temps(target) == []
        verify_then_revert(venv)
        assert target.read_bytes() == PRISTINE_A and not backup_path(target).exists()


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_reverts_exactly_one_restores(n, fake_tpl, fake_man, tmp_path):
    venv = kit.clone(fake_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    env = kit.env_with([fake_man], **{LOCK_TIMEOUT_ENV: "30"})
    for _ in range(5):
        assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]
        results = race([kit.fake_cmd("revert", venv, "--json")] * n, env, tmp_path)
        datas = [kit.json_of(p) for p in results]
        assert sorted(d["restored"] for d in datas) == [False] * (n - 1) + [True]
        assert target.read_bytes() == PRISTINE_A and not backup_path(target).exists()
        assert kit.temps(target) == []


def test_apply_racing_revert_ends_consistent(fake_tpl, fake_man, tmp_path):
    venv = kit.clone(fake_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    env = kit.env_with([fake_man], **{LOCK_TIMEOUT_ENV: "30"})
    seen = set()
    for round_ in range(12):
        if round_ % 2:  # start patched half of the time
            assert commands.apply.run(venv, manifest=MAN, patch_source=fake_patch).data["changed"]
        cmds = [kit.fake_cmd("apply", venv, "--json"), kit.fake_cmd("revert", venv, "--json")]
        if round_ % 4 >= 2:
            cmds.reverse()
        results = race(cmds, env, tmp_path)
        assert [p.returncode for p in results] == [0, 0], [p.stderr for p in results]
        state = state_of(venv, fake_man)
        seen.add(state)
        assert state in (("patched", "present"), ("pristine", "absent")), state
        if state[0] == "patched":
            assert target.read_bytes() == PATCHED_A and backup_path(target).read_bytes() == PRISTINE_A
            verify_then_revert(venv)  # next round from pristine
        else:
            assert target.read_bytes() == PRISTINE_A
        assert kit.temps(target) == []
    assert seen  # which order won is up to the scheduler; each outcome above is consistent


def test_concurrent_applies_real_transform(pinned, standin_tpl, tmp_path):
    """Four `python -m ple4patch apply` at once with libcst running under the lock."""
    man, pin = pinned
    venv = kit.clone(standin_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    env = kit.env_with([man], **{LOCK_TIMEOUT_ENV: "60"})
    cmd = [kit.PY, "-m", "ple4patch", "apply", str(venv), "--json"]
    results = race([cmd] * 4, env, tmp_path)
    datas = [kit.json_of(p) for p in results]
    assert sorted(d["changed"] for d in datas) == [False, False, False, True]
    assert kit.sha(target) == pin.patched_sha256 and kit.backup_sha(target) == pin.pristine_sha256
    assert kit.run_real("verify", venv, env=env).returncode == 0


def hold_lock(venv):
    fd = os.open(kit.site_packages(venv) / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_lock_held_too_long(command, fake_tpl, fake_man, tmp_path):
    venv = kit.clone(fake_tpl, tmp_path / "venv")
    env = kit.env_with([fake_man])
    if command == "revert":
        assert kit.fake_cli("apply", venv, env=env).returncode == 0
    before = kit.tree_hash(venv)
    fd = hold_lock(venv)  # another ple4patch (here: this test) holds the venv
    try:
        t0 = time.monotonic()
        proc = kit.fake_cli(command, venv, env={**env, LOCK_TIMEOUT_ENV: "0.5"})
        waited = time.monotonic() - t0
        assert proc.returncode == EXIT_LOCK_TIMEOUT
        err = kit.error_message(proc, command)
        assert "another process holds" in err and LOCK_TIMEOUT_ENV in err and "0.5 s" in err
        assert 0.5 <= waited < 10
        d = kit.json_of(kit.fake_cli(command, venv, "--json", env={**env, LOCK_TIMEOUT_ENV: "0.2"}))
        assert d["error"]["kind"] == "lock_timeout"
        assert kit.tree_hash(venv) == before
        # a waiter with a long enough timeout gets the lock once it is released
        waiter = subprocess.Popen(kit.fake_cmd(command, venv, "--json"), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env={**env, LOCK_TIMEOUT_ENV: "30"})
        time.sleep(1.0)
        assert waiter.poll() is None, "it waits while the lock is held"
    finally:
        os.close(fd)
    stdout, stderr = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, stderr
    assert kit.tree_hash(venv) != before


# -- a set of two files (the layer and the file that places the table), the real CLI and transforms --
#
# Each kind of set (`kit.SET_KINDS`): the layer with the start-up policy file, or with the
# VllmConfig module vllm/config/vllm.py.

from ple4patch.paths import JOURNAL_NAME  # noqa: E402


@pytest.fixture(scope="session", params=kit.SET_KINDS)
def set_kind(request):
    return request.param


@pytest.fixture(scope="session")
def set_pins(set_kind, tmp_path_factory):
    return kit.set_manifests(tmp_path_factory.getbasetemp(), set_kind)


@pytest.fixture(scope="session")
def set_tpl(set_kind, wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, f"race-set-{set_kind}",
                        wheelhouse.engine_set_of(set_kind))


def set_shas(venv, pins):
    site = kit.site_packages(venv)
    return {rel: (kit.sha(site / rel), kit.backup_sha(site / rel)) for rel in pins}


def test_concurrent_applies_of_a_set(set_pins, set_tpl, tmp_path):
    """Three applies of a two-file set at once: one patches both files, the others find them patched."""
    mans, pins = set_pins
    venv = kit.clone(set_tpl, tmp_path / "venv")
    env = kit.env_with(mans, **{LOCK_TIMEOUT_ENV: "60"})
    cmd = [kit.PY, "-m", "ple4patch", "apply", str(venv), "--json"]
    datas = [kit.json_of(p) for p in race([cmd] * 3, env, tmp_path)]
    assert sorted(d["changed"] for d in datas) == [False, False, True]
    assert set_shas(venv, pins) == {rel: (p.patched_sha256, p.pristine_sha256) for rel, p in pins.items()}
    assert not (kit.site_packages(venv) / JOURNAL_NAME).exists()


@pytest.mark.parametrize("start_patched", [False, True])
def test_apply_racing_revert_of_a_set_is_never_mixed(start_patched, set_pins, set_tpl, tmp_path):
    mans, pins = set_pins
    venv = kit.clone(set_tpl, tmp_path / "venv")
    env = kit.env_with(mans, **{LOCK_TIMEOUT_ENV: "60"})
    if start_patched:
        assert kit.run_real("apply", venv, env=env).returncode == 0
    cmds = [[kit.PY, "-m", "ple4patch", c, str(venv), "--json"] for c in ("apply", "revert")]
    results = race(cmds, env, tmp_path)
    assert [p.returncode for p in results] == [0, 0], [p.stderr for p in results]
    patched = {rel: (p.patched_sha256, p.pristine_sha256) for rel, p in pins.items()}
    pristine = {rel: (p.pristine_sha256, None) for rel, p in pins.items()}
    assert set_shas(venv, pins) in (patched, pristine)
    assert not (kit.site_packages(venv) / JOURNAL_NAME).exists()

"""Crash at every writing step: apply and revert SIGKILLed through the fault points.

The real CLI and the real transform on the stand-in engine (pinned by the test manifest),
installed by pip. Before each kill an unchecked-hash .pyc of the current file is put in
__pycache__ (what reproducible/distro builds ship; the interpreter never checks it against
the source), so a crash that leaves stale bytecode would show. After the kill:

- the target is byte-identical to the pristine or to the patched output (sha256 pins);
- the backup is absent or holds exactly the pristine bytes, and never is the target
  patched while its backup is gone;
- the only temp file is the one the `after-temp` kill left, whole (the bytes that were
  about to land), and `status` names it as a leftover;
- the dead process holds no lock: the re-run gets it at once;
- a re-run (apply, or revert) converges: apply -> verify 0, revert -> pristine and no
  backup; no temp file is left; a fresh interpreter loads exactly the current source.
"""

from __future__ import annotations

import signal

import pytest

import kit
from ple4patch import commands
from ple4patch import manifest as m
from ple4patch.fsio import APPLY_FAULT_POINTS, FAULT_ENV, LOCK_TIMEOUT_ENV, REVERT_FAULT_POINTS
from ple4patch.paths import BACKUP_SUFFIX, TEMP_PREFIX, backup_path

KILLED = -signal.SIGKILL

# What each kill leaves: (target is patched?, backup present?, a temp file left?)
APPLY_LEAVES = {
    "after-lock": (False, False, False),
    "after-backup": (False, True, False),
    "after-temp": (False, True, True),
    "after-replace": (True, True, False),
    "after-pycache": (True, True, False),
}
REVERT_LEAVES = {
    "after-lock": (True, True, False),
    "after-temp": (True, True, True),
    "after-replace": (False, True, False),
    "after-backup-removed": (False, False, False),
    "after-pycache": (False, False, False),
}


def test_tables_cover_every_fault_point():
    assert set(APPLY_LEAVES) | {"after-pins"} == set(APPLY_FAULT_POINTS)
    assert set(REVERT_LEAVES) == set(REVERT_FAULT_POINTS)


def manifest() -> m.Manifest:
    return m.load(kit.extra_manifests(), use_env=False)


def env(**extra) -> dict:
    return kit.env_with(kit.extra_manifests(), **{LOCK_TIMEOUT_ENV: "3", **extra})


def check_after_kill(venv, pin, patched: bool, has_backup: bool, has_temp: bool, temp_holds: str) -> None:
    target = kit.target_of(venv)
    assert kit.sha(target) == (pin.patched_sha256 if patched else pin.pristine_sha256)
    assert kit.backup_sha(target) == (pin.pristine_sha256 if has_backup else None)
    temps = kit.temps(target)
    if has_temp:
        assert len(temps) == 1 and kit.sha(temps[0]) == temp_holds, "the temp file is whole"
    else:
        assert temps == []
    r = commands.status.run(venv, manifest=manifest())
    assert r.exit_code == 0
    assert r.data["state"] == ("patched" if patched else "pristine")
    assert r.data["backup"]["state"] == ("present" if has_backup else "absent")
    assert any("interrupted run" in n for n in r.data["notes"]) == has_temp


def check_converged(venv, pin, patched: bool) -> None:
    target = kit.target_of(venv)
    assert kit.temps(target) == []
    if patched:
        assert commands.verify.run(venv, manifest=manifest()).exit_code == 0
        assert kit.sha(target) == pin.patched_sha256 and kit.backup_sha(target) == pin.pristine_sha256
    else:
        assert kit.sha(target) == pin.pristine_sha256
        assert not backup_path(target).exists()
        assert commands.status.run(venv, manifest=manifest()).data["state"] == "pristine"
    kit.assert_imports_current_source(venv)


@pytest.mark.parametrize("rerun", ["apply", "revert"])
@pytest.mark.parametrize("point", list(APPLY_LEAVES))
def test_apply_killed(point, rerun, standin_tpl, pin, tmp_path):
    venv = kit.clone(standin_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    kit.compile_unchecked(target)
    proc = kit.run_real("apply", venv, env=env(**{FAULT_ENV: point}))
    assert proc.returncode == KILLED, proc.stderr
    patched, has_backup, has_temp = APPLY_LEAVES[point]
    check_after_kill(venv, pin, patched, has_backup, has_temp, pin.patched_sha256)
    if point == "after-pycache":
        assert kit.pycs(target) == []

    proc = kit.run_real(rerun, venv, "--json", env=env())
    d = kit.json_of(proc)
    assert proc.returncode == 0, d
    if rerun == "apply":
        assert d["changed"] is (not patched)
    else:
        assert d["restored"] is patched
    check_converged(venv, pin, patched=rerun == "apply")


@pytest.mark.parametrize("rerun", ["revert", "apply"])
@pytest.mark.parametrize("point", list(REVERT_LEAVES))
def test_revert_killed(point, rerun, patched_tpl, pin, tmp_path):
    venv = kit.clone(patched_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    kit.compile_unchecked(target)
    proc = kit.run_real("revert", venv, env=env(**{FAULT_ENV: point}))
    assert proc.returncode == KILLED, proc.stderr
    patched, has_backup, has_temp = REVERT_LEAVES[point]
    check_after_kill(venv, pin, patched, has_backup, has_temp, pin.pristine_sha256)

    proc = kit.run_real(rerun, venv, "--json", env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_converged(venv, pin, patched=rerun == "apply")


def test_allow_unknown_killed_after_pins(standin_tpl, pin, tmp_path):
    """--allow-unknown killed once its local pin is written: the opt-in is kept, nothing else."""
    venv = kit.clone(standin_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    shipped_only = kit.env_with(**{LOCK_TIMEOUT_ENV: "3"})
    proc = kit.run_real("apply", venv, "--allow-unknown", env={**shipped_only, FAULT_ENV: "after-pins"})
    assert proc.returncode == KILLED
    assert kit.sha(target) == pin.pristine_sha256 and kit.backup_sha(target) == pin.pristine_sha256
    assert m.load_local(target).by_pristine(pin.pristine_sha256).patched_sha256 == pin.patched_sha256
    assert kit.temps(target) == []
    proc = kit.run_real("apply", venv, env=shipped_only)  # the recorded opt-in stands
    assert proc.returncode == 0, proc.stderr
    assert kit.run_real("verify", venv, env=shipped_only).returncode == 0
    assert kit.run_real("revert", venv, env=shipped_only).returncode == 0
    assert kit.sha(target) == pin.pristine_sha256 and not backup_path(target).exists()


def test_killed_again_and_again(standin_tpl, pin, tmp_path):
    """Each re-run killed at a later step than the one before, apply then revert: still whole."""
    venv = kit.clone(standin_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    for command, points in (("apply", APPLY_LEAVES), ("revert", REVERT_LEAVES)):
        for point in points:
            proc = kit.run_real(command, venv, env=env(**{FAULT_ENV: point}))
            # 0: an earlier kill left nothing for this run to do past that step
            assert proc.returncode in (KILLED, 0), (command, point, proc.stderr)
            assert kit.sha(target) in (pin.pristine_sha256, pin.patched_sha256)
            if kit.sha(target) == pin.patched_sha256:
                assert kit.backup_sha(target) == pin.pristine_sha256
        proc = kit.run_real(command, venv, env=env())
        assert proc.returncode == 0, proc.stderr
        check_converged(venv, pin, patched=command == "apply")


@pytest.mark.parametrize("rerun", ["apply", "revert", "apply-when-patched"])
def test_partial_temp_of_the_backup_is_never_taken_for_anything(rerun, standin_tpl, patched_tpl, pin, tmp_path):
    """A kill while the backup's temp file was half written (no fault point sits inside that
    write, so the leftover is made by hand): status names it, nothing reads it as a backup or
    a target, and the next run of any command removes it."""
    venv = kit.clone(patched_tpl if rerun == "apply-when-patched" else standin_tpl, tmp_path / "venv")
    target = kit.target_of(venv)
    half = target.read_bytes()[: 1000] if rerun != "apply-when-patched" else b"# half a file"
    leftover = target.parent / f"{TEMP_PREFIX}{target.name}{BACKUP_SUFFIX}-4242-0badf00d"
    leftover.write_bytes(half)
    r = commands.status.run(venv, manifest=manifest())
    expect_backup = "present" if rerun == "apply-when-patched" else "absent"
    assert (r.exit_code, r.data["backup"]["state"]) == (0, expect_backup)
    assert any(leftover.name in n for n in r.data["notes"])
    assert r.data["state"] == ("patched" if rerun == "apply-when-patched" else "pristine")
    command = rerun.split("-")[0]
    proc = kit.run_real(command, venv, "--json", env=env())
    d = kit.json_of(proc)
    assert proc.returncode == 0 and any("interrupted run" in n and leftover.name in n for n in d["notes"]), d
    assert not leftover.exists() and kit.temps(target) == []
    check_converged(venv, pin, patched=command == "apply")


# -- a set of two files (the PLE layer and the file that places the table) ------------------------
#
# Each kind of set (`kit.SET_KINDS`): the stand-in engine with its policy file (mirroring 1Cat-vLLM
# 51c0f972's runtime_defaults.py), or with its VllmConfig module (mirroring ChainZeaxion/1Cat-vLLM
# ebeb346a's vllm/config/vllm.py): apply writes both backups, then the journal, then replaces the
# layer, then the other file. After a
# kill at any step each file is whole (its pristine or its patched bytes, never a patched file
# without its backup), the journal is there exactly while files may disagree, and the next apply
# (or revert) brings both files to patched (or pristine) and removes the journal.

from ple4patch.fsio import SET_APPLY_FAULT_POINTS, SET_REVERT_FAULT_POINTS  # noqa: E402
from ple4patch.paths import CONFIG_REL, JOURNAL_NAME, POLICY_REL, TARGET_REL  # noqa: E402

# point -> (layer patched?, policy patched?, backups present?, journal present?)
SET_APPLY_LEAVES = {
    "after-lock": (False, False, False, False),
    "after-backup": (False, False, True, False),
    "after-journal": (False, False, True, True),
    "after-temp": (False, False, True, True),
    "between-replaces": (True, False, True, True),
    "after-replace": (True, True, True, True),
    "after-pycache": (True, True, True, False),
}
SET_REVERT_LEAVES = {
    "after-lock": (True, True, True, False),
    "after-journal": (True, True, True, True),
    "after-temp": (True, True, True, True),
    "between-replaces": (False, True, True, True),
    "after-replace": (False, False, True, True),
    "after-backup-removed": (False, False, False, True),
    "after-pycache": (False, False, False, False),
}


def test_set_tables_cover_every_set_fault_point():
    assert set(SET_APPLY_LEAVES) | {"after-pins"} == set(SET_APPLY_FAULT_POINTS)
    assert set(SET_REVERT_LEAVES) == set(SET_REVERT_FAULT_POINTS)


@pytest.fixture(scope="session", params=kit.SET_KINDS)
def set_kind(request):
    """Each kind of set: the layer with the start-up policy file, or with vllm/config/vllm.py."""
    return request.param


@pytest.fixture(scope="session")
def set_pins(set_kind, tmp_path_factory):
    return kit.set_manifests(tmp_path_factory.getbasetemp(), set_kind)


@pytest.fixture(scope="session")
def set_tpl(set_kind, wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, f"crash-set-{set_kind}",
                        wheelhouse.engine_set_of(set_kind))


def set_env(set_pins, **extra) -> dict:
    return kit.env_with(set_pins[0], **{LOCK_TIMEOUT_ENV: "3", **extra})


@pytest.fixture(scope="session")
def patched_set_tpl(set_kind, set_tpl, set_pins, tmp_path_factory):
    venv = kit.clone(set_tpl, tmp_path_factory.mktemp(f"crash-set-{set_kind}") / "patched")
    proc = kit.run_real("apply", venv, env=set_env(set_pins))
    assert proc.returncode == 0, proc.stderr
    return venv


def set_rels(set_pins) -> list[str]:
    """The set's files, in its order (the layer first)."""
    rels = list(set_pins[1])
    assert rels[0] == TARGET_REL and rels[1] in (POLICY_REL, CONFIG_REL), rels
    return rels


def set_files(venv, set_pins):
    site = kit.site_packages(venv)
    return [site / rel for rel in set_rels(set_pins)]


def check_set_after_kill(venv, set_pins, layer_patched, policy_patched, backups, journal):
    """`layer_patched`: the first file replaced; `policy_patched`: the other one."""
    pins = set_pins[1]
    rels = set_rels(set_pins)
    site = kit.site_packages(venv)
    for target, rel, patched in zip(set_files(venv, set_pins), rels, (layer_patched, policy_patched)):
        pin = pins[rel]
        assert kit.sha(target) == (pin.patched_sha256 if patched else pin.pristine_sha256), rel
        assert kit.backup_sha(target) == (pin.pristine_sha256 if backups else None), rel
    assert (site / JOURNAL_NAME).exists() is journal
    proc = kit.run_real("status", venv, "--json", env=set_env(set_pins))
    d = kit.json_of(proc)
    assert proc.returncode == 0, d
    assert [f["path"] for f in d["files"]] == rels
    assert [f["state"] for f in d["files"]] == ["patched" if p else "pristine" for p in (layer_patched, policy_patched)]
    expect = "mixed" if layer_patched != policy_patched else ("patched" if layer_patched else "pristine")
    assert d["set"]["state"] == expect
    assert (d["set"]["journal"] is not None) is journal
    if journal:
        assert any("interrupted" in n and JOURNAL_NAME in n for n in d["notes"]), d["notes"]
    # one next step, and for a half-applied set the one that finishes it (verify would fail)
    text = kit.run_real("status", venv, env=set_env(set_pins)).stdout
    nexts = [line for line in kit.logical_lines(text) if line.startswith("next:")]
    assert len(nexts) == 1, text
    if layer_patched != policy_patched:
        assert "either makes the whole set one state" in nexts[0] and "verify" not in nexts[0], text


def check_set_converged(venv, set_pins, patched: bool):
    pins = set_pins[1]
    site = kit.site_packages(venv)
    assert not (site / JOURNAL_NAME).exists()
    for target, rel in zip(set_files(venv, set_pins), set_rels(set_pins)):
        assert kit.temps(target) == []
        pin = pins[rel]
        assert kit.sha(target) == (pin.patched_sha256 if patched else pin.pristine_sha256)
        assert kit.backup_sha(target) == (pin.pristine_sha256 if patched else None)
    verify = kit.run_real("verify", venv, env=set_env(set_pins))
    assert (verify.returncode == 0) is patched, verify.stdout + verify.stderr


@pytest.mark.parametrize("rerun", ["apply", "revert"])
@pytest.mark.parametrize("point", list(SET_APPLY_LEAVES))
def test_set_apply_killed(point, rerun, set_tpl, set_pins, tmp_path):
    venv = kit.clone(set_tpl, tmp_path / "venv")
    proc = kit.run_real("apply", venv, env=set_env(set_pins, **{FAULT_ENV: point}))
    assert proc.returncode == KILLED, proc.stderr
    check_set_after_kill(venv, set_pins, *SET_APPLY_LEAVES[point])
    proc = kit.run_real(rerun, venv, "--json", env=set_env(set_pins))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_set_converged(venv, set_pins, patched=rerun == "apply")


@pytest.mark.parametrize("rerun", ["revert", "apply"])
@pytest.mark.parametrize("point", list(SET_REVERT_LEAVES))
def test_set_revert_killed(point, rerun, patched_set_tpl, set_pins, tmp_path):
    venv = kit.clone(patched_set_tpl, tmp_path / "venv")
    proc = kit.run_real("revert", venv, env=set_env(set_pins, **{FAULT_ENV: point}))
    assert proc.returncode == KILLED, proc.stderr
    check_set_after_kill(venv, set_pins, *SET_REVERT_LEAVES[point])
    proc = kit.run_real(rerun, venv, "--json", env=set_env(set_pins))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_set_converged(venv, set_pins, patched=rerun == "apply")


@pytest.mark.parametrize("point", ["after-journal", "between-replaces"])
def test_set_apply_ctrl_c(point, set_tpl, set_pins, tmp_path):
    """Ctrl-C in a set's apply: before the first replace everything is taken back (backups,
    journal); between the replaces the journal stays and the next apply finishes the set."""
    from ple4patch.errors import EXIT_INTERRUPTED

    venv = kit.clone(set_tpl, tmp_path / "venv")
    before = kit.tree_hash(venv)
    proc = kit.popen_for_ctrl_c([kit.PY, "-m", "ple4patch", "apply", str(venv)],
                                env=set_env(set_pins, **{FAULT_ENV: f"sleep:{point}"}))
    assert f"fault point {point}: sleeping" in proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    if point == "after-journal":
        assert kit.tree_hash(venv) == before, "an interrupted set apply left something behind"
    else:
        check_set_after_kill(venv, set_pins, True, False, True, True)
    proc = kit.run_real("apply", venv, env=set_env(set_pins))
    assert proc.returncode == 0, proc.stderr
    check_set_converged(venv, set_pins, patched=True)

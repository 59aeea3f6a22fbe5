"""Another program (pip, an editor) writes a file of the set while apply or revert works on it.

The venv lock keeps other ple4patch runs out, not pip: between the assessment (under the lock)
and the replace, `pip install -U 1cat-vllm` or an editor may write the target. The write is
played at a fault point (`PLE4PATCH_FAULT=run:<point>` runs `$PLE4PATCH_FAULT_RUN` there), two
ways: as pip does (a temp file renamed over the target: a new inode) and as an editor that
writes the file in place (same inode). Each time the other program's bytes must survive, this
run must take back what it wrote (backups, journal, the files it had replaced already), and the
command must exit 5 saying what happened and to run it again.
"""

from __future__ import annotations

import shlex

import pytest

import kit
from kit.fakepatch import PRISTINE_A, fake_patch
from ple4patch.errors import EXIT_MODIFIED
from ple4patch.fsio import FAULT_ENV, FAULT_RUN_ENV, LOCK_TIMEOUT_ENV
from ple4patch.paths import JOURNAL_NAME, LOCK_NAME, POLICY_REL, TARGET_REL, backup_path, local_pins_path

NEWER = b"# a newer engine release, installed by pip meanwhile\n"
WRITERS = {
    "pip": "cp {new} {target}.tmp-pip && mv {target}.tmp-pip {target}",  # a new inode
    "editor": "cp {new} {target}",  # the same inode, truncated and written
}


def writer(how: str, new: bytes, target, tmp_path) -> str:
    src = tmp_path / f"new-{target.name}"
    src.write_bytes(new)
    return WRITERS[how].format(new=shlex.quote(str(src)), target=shlex.quote(str(target)))


def site_files(venv) -> set[str]:
    """Every path in site-packages but the lock file and bytecode, relative to it."""
    site = kit.site_packages(venv)
    return {p.relative_to(site).as_posix() for p in site.rglob("*")
            if p.name != LOCK_NAME and "__pycache__" not in p.parts}


def check_refused(proc, command: str) -> None:
    assert proc.returncode == EXIT_MODIFIED, proc.stdout + proc.stderr
    msg = kit.error_message(proc, command)
    assert "changed while ple4patch was working" in msg and "run it again" in msg, msg
    assert f"ple4patch {command} " in msg, msg


@pytest.mark.parametrize("how", list(WRITERS))
@pytest.mark.parametrize("point", ["after-backup", "after-temp"])
def test_apply_keeps_a_file_written_meanwhile(point, how, venv, fake_man, tmp_path):
    target = kit.target_of(venv)
    before = site_files(venv)
    new = PRISTINE_A + NEWER
    env = kit.env_with([fake_man], **{FAULT_ENV: f"run:{point}",
                                      FAULT_RUN_ENV: writer(how, new, target, tmp_path)})
    proc = kit.fake_cli("apply", venv, env=env)
    check_refused(proc, "apply")
    assert target.read_bytes() == new, "the other program's write was lost"
    assert not backup_path(target).exists() and kit.temps(target) == []
    assert site_files(venv) == before


def test_allow_unknown_apply_takes_back_its_local_pin(venv, tmp_path):
    target = kit.target_of(venv)
    before = site_files(venv)
    new = PRISTINE_A + NEWER
    env = kit.env_with([], **{FAULT_ENV: "run:after-pins", FAULT_RUN_ENV: writer("pip", new, target, tmp_path)})
    proc = kit.fake_cli("apply", "--allow-unknown", venv, env=env)
    check_refused(proc, "apply")
    assert target.read_bytes() == new
    assert not local_pins_path(target).exists() and not backup_path(target).exists()
    assert site_files(venv) == before


@pytest.mark.parametrize("how", list(WRITERS))
def test_revert_keeps_a_file_written_meanwhile(how, venv, fake_man, tmp_path):
    target = kit.target_of(venv)
    assert kit.fake_cli("apply", venv, env=kit.env_with([fake_man])).returncode == 0
    edited = fake_patch(PRISTINE_A.decode()).encode() + b"MY_HOTFIX = True\n"
    env = kit.env_with([fake_man], **{FAULT_ENV: "run:after-temp",
                                      FAULT_RUN_ENV: writer(how, edited, target, tmp_path)})
    proc = kit.fake_cli("revert", venv, env=env)
    check_refused(proc, "revert")
    assert target.read_bytes() == edited, "the hand edit was lost"
    assert backup_path(target).read_bytes() == PRISTINE_A and kit.temps(target) == []


# -- a set of two files: the layer is replaced first, then the policy file --------------------


@pytest.fixture(scope="session")
def set_pins(tmp_path_factory):
    return kit.standin_set_manifests(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def set_tpl(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "meanwhile-set",
                        wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes()))


def set_env(set_pins, **extra) -> dict:
    return kit.env_with(set_pins[0], **{LOCK_TIMEOUT_ENV: "3", **extra})


@pytest.mark.parametrize("point", ["after-temp", "between-replaces"])
def test_set_apply_takes_back_the_layer_when_the_policy_changed(point, set_tpl, set_pins, tmp_path):
    """The policy file is written after the layer was assessed: at `between-replaces` the
    layer holds its patched bytes already, and is put back to its pristine bytes."""
    venv = kit.clone(set_tpl, tmp_path / "venv")
    site = kit.site_packages(venv)
    layer, policy = site / TARGET_REL, site / POLICY_REL
    before = site_files(venv)
    new = kit.standin_policy_bytes() + NEWER
    env = set_env(set_pins, **{FAULT_ENV: f"run:{point}", FAULT_RUN_ENV: writer("pip", new, policy, tmp_path)})
    proc = kit.run_real("apply", venv, env=env)
    check_refused(proc, "apply")
    assert policy.read_bytes() == new
    assert kit.sha(layer) == set_pins[1][TARGET_REL].pristine_sha256, "the set is left mixed"
    assert not (site / JOURNAL_NAME).exists()
    assert site_files(venv) == before


def test_set_revert_takes_back_the_layer_when_the_policy_changed(set_tpl, set_pins, tmp_path):
    venv = kit.clone(set_tpl, tmp_path / "venv")
    site = kit.site_packages(venv)
    layer, policy = site / TARGET_REL, site / POLICY_REL
    assert kit.run_real("apply", venv, env=set_env(set_pins)).returncode == 0
    pins = set_pins[1]
    edited = policy.read_bytes() + b"MY_HOTFIX = True\n"
    env = set_env(set_pins, **{FAULT_ENV: "run:between-replaces",
                               FAULT_RUN_ENV: writer("editor", edited, policy, tmp_path)})
    proc = kit.run_real("revert", venv, env=env)
    check_refused(proc, "revert")
    assert policy.read_bytes() == edited
    assert kit.sha(layer) == pins[TARGET_REL].patched_sha256, "the set is left mixed"
    assert kit.backup_sha(layer) == pins[TARGET_REL].pristine_sha256
    assert kit.backup_sha(policy) == pins[POLICY_REL].pristine_sha256
    assert not (site / JOURNAL_NAME).exists() and kit.temps(layer) == []

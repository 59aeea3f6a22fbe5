"""Bad input around a set of files: a journal that is garbage or in the way, a symlinked member
(the policy file or vllm/config/vllm.py), an edited one. Each gets a clear answer naming what is
wrong and what to do, and loses nothing (the real CLI, the stand-in engine with its policy file
or its VllmConfig module, installed by pip: each kind of set, `kit.SET_KINDS`)."""

from __future__ import annotations

import os

import pytest

import kit
from ple4patch.errors import EXIT_MODIFIED
from ple4patch.paths import JOURNAL_NAME, TARGET_REL, backup_path


@pytest.fixture(scope="session", params=kit.SET_KINDS)
def set_kind(request):
    return request.param


@pytest.fixture(scope="session")
def set_pins(set_kind, tmp_path_factory):
    return kit.set_manifests(tmp_path_factory.getbasetemp(), set_kind)


@pytest.fixture(scope="session")
def set_tpl(set_kind, wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, f"input-set-{set_kind}",
                        wheelhouse.engine_set_of(set_kind))


@pytest.fixture
def member_rel(set_pins):
    """The set's other file (the policy file or vllm/config/vllm.py)."""
    return list(set_pins[1])[1]


@pytest.fixture
def venv(set_tpl, tmp_path):
    return kit.clone(set_tpl, tmp_path / "venv")


def cli(*args, env):
    proc = kit.run_real(*args, "--json", env=env)
    return proc.returncode, kit.json_of(proc)


@pytest.mark.parametrize("garbage", [b"", b"{not json", b'{"schema_version": 1, "direction": "sideways", "files": {}}',
                                     b"\xff\xfe\x00"])
def test_a_garbage_journal_is_named_and_then_removed(garbage, venv, set_pins):
    env = kit.env_with(set_pins[0])
    journal = kit.site_packages(venv) / JOURNAL_NAME
    journal.write_bytes(garbage)
    rc, d = cli("status", venv, env=env)
    assert rc == 0 and d["set"]["journal"] is None and "not a ple4patch journal" in d["set"]["journal_problem"]
    assert any(JOURNAL_NAME in n and "next apply/revert removes it" in n for n in d["notes"])
    rc, d = cli("apply", venv, env=env)
    assert rc == 0 and [f["changed"] for f in d["files"]] == [True, True]
    assert not journal.exists()
    assert cli("verify", venv, env=env)[0] == 0


def test_a_folder_where_the_journal_goes_is_refused_before_writing(venv, set_pins):
    env = kit.env_with(set_pins[0])
    (kit.site_packages(venv) / JOURNAL_NAME).mkdir()
    before = kit.tree_hash(venv)
    for command in ("apply", "revert"):
        rc, d = cli(command, venv, env=env)
        assert rc == EXIT_MODIFIED and "in the way of ple4patch's journal" in d["error"]["message"], d
        assert "move it away" in d["error"]["message"]
    assert kit.tree_hash(venv) == before
    assert cli("status", venv, env=env)[0] == 0


def test_a_symlinked_member_refuses_the_set(venv, set_pins, member_rel, tmp_path):
    env = kit.env_with(set_pins[0])
    policy = kit.site_packages(venv) / member_rel
    real = tmp_path / "elsewhere.py"
    real.write_bytes(policy.read_bytes())
    policy.unlink()
    os.symlink(real, policy)
    before = kit.tree_hash(venv)
    rc, d = cli("apply", venv, env=env)
    assert rc == EXIT_MODIFIED and f"{policy.name} is a symlink" in d["error"]["message"], d
    assert kit.tree_hash(venv) == before and not backup_path(kit.site_packages(venv) / TARGET_REL).exists()


def test_a_member_edited_after_apply_blocks_revert_of_the_set(venv, set_pins, member_rel):
    env = kit.env_with(set_pins[0])
    assert cli("apply", venv, env=env)[0] == 0
    policy = kit.site_packages(venv) / member_rel
    policy.write_bytes(policy.read_bytes() + b"\n# edited after apply\n")
    before = kit.tree_hash(venv)
    rc, d = cli("revert", venv, env=env)
    assert rc == EXIT_MODIFIED and "cannot revert" in d["error"]["message"] and member_rel in d["error"]["message"]
    assert kit.tree_hash(venv) == before, "the layer was reverted alone"
    rc, d = cli("verify", venv, env=env)
    assert rc != 0 and member_rel in d["error"]["message"]

"""apply / status / verify / revert of a set of files: the PLE layer and the file that places the
PLE table by itself, in each kind of set (`kit.SET_KINDS`): the start-up policy file, or in
releases before it the VllmConfig module.

The stand-in engine as a real wheel with both files (the policy mirrors 1CatAI/1Cat-vLLM
51c0f97201a70a644a80ac21d292a15eff0dc4e6's vllm/platforms/runtime_defaults.py, the config module
ChainZeaxion/1Cat-vLLM ebeb346a66d5d485d71fb2fc4079c8b891dd9250's vllm/config/vllm.py), the real
transforms, pins made at session start (`kit.set_manifests`).
"""

from __future__ import annotations

import json

import pytest

import kit
from ple4patch import commands
from ple4patch import manifest as m
from ple4patch.errors import ModifiedFile, UnpinnedFile, VerifyFailed
from ple4patch.paths import CONFIG_REL, JOURNAL_NAME, POLICY_REL, TARGET_REL, backup_path, local_pins_path
from ple4patch.transform import patch_source

MEMBER = {"policy": POLICY_REL, "config": CONFIG_REL}  # the second file of each kind of set
# a line the member's patch adds (in the dry run's diff)
ADDED = {"policy": "+    ple4_policy_check(self, defaults)",
         "config": "+        if not ple4_policy_skips_auto_placement(self) and ("}
LOCAL_PINS = {"policy": ".ple4patch-pins.runtime_defaults.json", "config": ".ple4patch-pins.config_vllm.json"}


@pytest.fixture(params=kit.SET_KINDS)
def kind(request):
    return request.param


@pytest.fixture
def set_pins(kind, tmp_path_factory):
    return kit.set_manifests(tmp_path_factory.getbasetemp(), kind)


@pytest.fixture
def man(set_pins):
    return m.load(set_pins[0], use_env=False)


@pytest.fixture
def set_venv(kind, wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine_set_of(kind))


@pytest.fixture
def rel(kind):
    return MEMBER[kind]


def files(venv, rel=POLICY_REL):
    site = kit.site_packages(venv)
    return site / TARGET_REL, site / rel


def test_set_cycle(set_venv, man, set_pins, kind, rel):
    layer, policy = files(set_venv, rel)
    pins = set_pins[1]
    before = kit.site_snapshot(set_venv, pycache=False)
    unchanged = kit.tree_hash(set_venv)

    r = commands.status.run(set_venv, manifest=man)
    assert r.data["set"] == {"files": [TARGET_REL, rel], "state": "pristine", "journal": None,
                             "journal_problem": None}
    assert [f["state"] for f in r.data["files"]] == ["pristine", "pristine"]
    assert f"file:    {policy}" in r.output and r.message.startswith("set:     pristine (2 files")
    assert r.data["notes"] == []  # a member's placement is patched with the set: no note

    r = commands.apply.run(set_venv, manifest=man, dry_run=True)
    assert f"--- a/{TARGET_REL}" in r.output and f"--- a/{rel}" in r.output
    assert ADDED[kind] in r.output
    assert kit.tree_hash(set_venv) == unchanged

    r = commands.apply.run(set_venv, manifest=man)
    assert r.data["changed"] and [f["changed"] for f in r.data["files"]] == [True, True]
    assert r.message.count("patched: ") == 2
    for target, r_ in ((layer, TARGET_REL), (policy, rel)):
        assert kit.sha(target) == pins[r_].patched_sha256
        assert kit.backup_sha(target) == pins[r_].pristine_sha256
    assert not (kit.site_packages(set_venv) / JOURNAL_NAME).exists()

    r = commands.verify.run(set_venv, manifest=man)
    assert r.exit_code == 0 and r.message.count("ok: ") == 2
    r = commands.status.run(set_venv, manifest=man)
    assert r.data["set"]["state"] == "patched"
    assert r.data["files"][1]["pin"]["target"] == rel
    assert r.data["notes"] == [] and "note:" not in r.message  # no placement note, patched or not

    r = commands.apply.run(set_venv, manifest=man)
    assert r.data["changed"] is False and "2 files" in r.message

    r = commands.revert.run(set_venv, manifest=man)
    assert r.data["restored"] and r.message.count("reverted: ") == 2
    assert r.data["set"]["state"] == "pristine"
    for target in (layer, policy):
        assert not backup_path(target).exists()
    assert kit.site_snapshot(set_venv, pycache=False) == before


@pytest.mark.parametrize("kind", ["policy"])
def test_release_without_policy_file_is_a_one_file_set(wheelhouse, engine_venv, man):
    venv = engine_venv(wheelhouse.engine(kit.standin_bytes()))
    r = commands.status.run(venv, manifest=man)
    assert r.data["set"]["files"] == [TARGET_REL] and len(r.data["files"]) == 1
    assert "set:" not in r.message
    assert commands.apply.run(venv, manifest=man).data["changed"]
    assert commands.verify.run(venv, manifest=man).exit_code == 0


@pytest.mark.parametrize("kind", ["policy"])
def test_policy_file_without_placement_functions_is_not_in_the_set(wheelhouse, engine_venv, man):
    text = kit.standin_policy_bytes().replace(b"def _apply_sm70_qwen38_disk_ple_defaults(", b"def _a(").replace(
        b"def _qwen4exp_ple_cascade_requested(", b"def _b(")
    venv = engine_venv(wheelhouse.engine_set(kit.standin_bytes(), text))
    r = commands.apply.run(venv, manifest=man)
    assert r.data["set"]["files"] == [TARGET_REL]
    assert files(venv)[1].read_bytes() == text
    assert not backup_path(files(venv)[1]).exists()


def test_a_modified_member_refuses_the_whole_set(set_venv, man, rel):
    layer, policy = files(set_venv, rel)
    policy.write_bytes(policy.read_bytes() + b"\n# local edit\n")
    before = kit.tree_hash(set_venv)
    with pytest.raises(ModifiedFile, match=f"{policy.name} matches neither"):
        commands.apply.run(set_venv, manifest=man)
    assert kit.tree_hash(set_venv) == before, "a refused set wrote something"
    assert not backup_path(layer).exists()


def test_an_unpinned_member_needs_allow_unknown(set_venv, set_pins, kind, rel):
    layer_only = m.load(set_pins[0][:1], use_env=False)
    layer, policy = files(set_venv, rel)
    before = kit.tree_hash(set_venv)
    with pytest.raises(UnpinnedFile, match=f"{policy.name} is as shipped") as err:
        commands.apply.run(set_venv, manifest=layer_only)
    if kind == "config":  # why ple4patch patches that file at all, and why it has no pin
        assert (f"this release places the PLE table by itself from {CONFIG_REL}" in str(err.value)
                and "ships no pin for these bytes" in str(err.value)), err.value
    assert f"apply --allow-unknown {set_venv}" in str(err.value)
    assert kit.tree_hash(set_venv) == before
    r = commands.apply.run(set_venv, manifest=layer_only, allow_unknown=True)
    assert [f["changed"] for f in r.data["files"]] == [True, True]
    pins = local_pins_path(policy)
    assert pins.name == LOCAL_PINS[kind]
    assert json.loads(pins.read_text())["target"] == rel
    assert not local_pins_path(layer).exists()  # the layer is pinned
    assert commands.verify.run(set_venv, manifest=layer_only).exit_code == 0
    assert commands.revert.run(set_venv, manifest=layer_only).data["set"]["state"] == "pristine"


def test_an_unusable_local_pins_file_of_a_patched_member_is_named(set_venv, set_pins, kind, rel):
    """A member applied with --allow-unknown, then its local pins file damaged: the member is no
    known output any more, and status, verify and apply name that pins file and the steps that
    work (move it away, revert, apply --allow-unknown), not a reinstall; the steps as said patch
    the set again."""
    layer_only = m.load(set_pins[0][:1], use_env=False)
    layer, member = files(set_venv, rel)
    commands.apply.run(set_venv, manifest=layer_only, allow_unknown=True)
    pins = local_pins_path(member)
    assert pins.name == LOCAL_PINS[kind]
    pins.write_text("{not json")
    steps = (f"move {pins} away", f"then `ple4patch revert {set_venv}`",
             f"then `ple4patch apply --allow-unknown {set_venv}`")

    r = commands.status.run(set_venv, manifest=layer_only)
    assert [f["state"] for f in r.data["files"]] == ["patched", "modified"]
    assert f"its local pins file {pins} is unusable (manifest {pins} is not valid JSON" in r.output, r.output
    (next_line,) = [line for line in r.message.splitlines() if line.startswith("next:")]
    assert all(step in next_line for step in steps) and "reinstall" not in next_line, next_line
    with pytest.raises(VerifyFailed) as err:
        commands.verify.run(set_venv, manifest=layer_only)
    assert f"{pins} is unusable" in str(err.value) and all(step in str(err.value) for step in steps), err.value
    before = kit.tree_hash(set_venv)
    for allow in (False, True):
        with pytest.raises(ModifiedFile) as err:
            commands.apply.run(set_venv, manifest=layer_only, allow_unknown=allow)
        assert f"{pins} is unusable" in str(err.value) and all(step in str(err.value) for step in steps)
    assert kit.tree_hash(set_venv) == before and pins.read_text() == "{not json"

    pins.rename(pins.with_name("mine.json"))
    assert commands.revert.run(set_venv, manifest=layer_only).data["set"]["state"] == "unpinned"
    commands.apply.run(set_venv, manifest=layer_only, allow_unknown=True)
    assert commands.verify.run(set_venv, manifest=layer_only).exit_code == 0


def test_a_layer_patched_alone_gets_its_member(set_venv, man, set_pins, rel):
    """A venv patched when the set was the layer alone (an older ple4patch, or an engine upgrade
    that brought the policy file): apply patches the other file only."""
    layer, policy = files(set_venv, rel)
    pristine = layer.read_bytes()
    backup_path(layer).write_bytes(pristine)
    layer.write_text(patch_source(pristine.decode()))
    r = commands.status.run(set_venv, manifest=man)
    assert r.data["set"]["state"] == "mixed" and "next:    ple4patch apply" in r.message
    with pytest.raises(VerifyFailed, match=f"{policy.name} is pristine"):
        commands.verify.run(set_venv, manifest=man)
    r = commands.apply.run(set_venv, manifest=man)
    assert [f["changed"] for f in r.data["files"]] == [False, True]
    assert r.data["state_before"] == "patched" and r.message.count("patched: ") == 1
    assert commands.verify.run(set_venv, manifest=man).exit_code == 0


def test_revert_of_a_mixed_set_restores_what_is_patched(set_venv, man, rel):
    layer, policy = files(set_venv, rel)
    commands.apply.run(set_venv, manifest=man)
    layer.write_bytes(backup_path(layer).read_bytes())  # the layer put back by hand
    r = commands.revert.run(set_venv, manifest=man)
    assert [f["restored"] for f in r.data["files"]] == [False, True]
    assert r.data["set"]["state"] == "pristine"
    assert not backup_path(layer).exists() and not backup_path(policy).exists()


def test_revert_refuses_before_writing_when_one_backup_is_gone(set_venv, man, rel):
    layer, policy = files(set_venv, rel)
    commands.apply.run(set_venv, manifest=man)
    backup_path(policy).unlink()
    before = kit.tree_hash(set_venv)
    with pytest.raises(ModifiedFile, match=f"{policy.name}: its backup is absent"):
        commands.revert.run(set_venv, manifest=man)
    assert kit.tree_hash(set_venv) == before, "the layer was reverted although the set could not be"

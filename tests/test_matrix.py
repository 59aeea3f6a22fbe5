"""The whole cycle with the real transform on every real engine file and on the stand-in.

Each engine is a wheel built here and installed by pip into a throw-away venv:
dry-run writes nothing -> apply -> apply again changes nothing -> status patched
-> verify 0 -> revert -> byte-identical with the backup gone -> status pristine.
The real files are pinned by the shipped manifest; the stand-in by the TEST
manifest tests/fixtures/standin_manifest.json.
"""

from __future__ import annotations

import sys

import pytest

import kit
from kit import TEST_MANIFEST, site_snapshot, standin_bytes
from ple4patch import commands
from ple4patch import manifest as m
from ple4patch.errors import EXIT_UNPINNED, UnpinnedFile
from ple4patch.sentinel import PATCH_ID, find_patch_id
from ple4patch.paths import backup_path

def cycle(venv, manifest: m.Manifest, pristine: bytes) -> None:
    target = kit.target_of(venv)
    before = site_snapshot(venv, pycache=False)
    assert commands.status.run(venv, manifest=manifest).data["state"] == "pristine"

    r = commands.apply.run(venv, dry_run=True, manifest=manifest)
    assert r.exit_code == 0 and "matches the pin" in r.message and r.output.startswith("--- a/")
    assert site_snapshot(venv, pycache=False) == before

    r = commands.apply.run(venv, manifest=manifest)
    assert r.data["changed"] and r.data["state"] == "patched"
    patched = target.read_bytes()
    assert find_patch_id(patched.decode()) == PATCH_ID
    assert kit.sha256_hex(patched) == r.data["pin"]["patched_sha256"]
    after_apply = site_snapshot(venv, pycache=False)

    r = commands.apply.run(venv, manifest=manifest)
    assert r.data["changed"] is False and site_snapshot(venv, pycache=False) == after_apply

    r = commands.status.run(venv, manifest=manifest)
    assert (r.exit_code, r.data["state"], r.data["backup"]["state"]) == (0, "patched", "present")
    assert commands.verify.run(venv, manifest=manifest).exit_code == 0

    r = commands.revert.run(venv, manifest=manifest)
    assert r.data["restored"]
    assert target.read_bytes() == pristine
    assert not backup_path(target).exists()
    assert site_snapshot(venv, pycache=False) == before
    assert commands.status.run(venv, manifest=manifest).data["state"] == "pristine"


def test_real_engine_cycle(shared_engine, wheelhouse, engine_venv):
    assert shared_engine.path.read_bytes() == shared_engine.data
    venv = engine_venv(wheelhouse.engine(shared_engine.data, version="1.5.1.dev945+gfe67339dd"))
    shipped = m.load(use_env=False)
    assert shipped.by_pristine(shared_engine.sha256) is not None, "every file in ../shared is pinned"
    cycle(venv, shipped, shared_engine.data)


def test_standin_cycle_with_test_manifest(wheelhouse, engine_venv):
    data = standin_bytes()
    venv = engine_venv(wheelhouse.engine(data, version="1.5.1"))
    cycle(venv, m.load([TEST_MANIFEST], use_env=False), data)


def test_unknown_file_refused_then_allowed(wheelhouse, engine_venv):
    data = standin_bytes()  # not in the shipped manifest
    venv = engine_venv(wheelhouse.engine(data, version="1.5.2"))
    target = kit.target_of(venv)
    shipped = m.load(use_env=False)
    assert commands.status.run(venv, manifest=shipped).data["state"] == "unpinned"
    with pytest.raises(UnpinnedFile) as info:
        commands.apply.run(venv, manifest=shipped)
    assert info.value.exit_code == EXIT_UNPINNED
    assert target.read_bytes() == data
    r = commands.apply.run(venv, manifest=shipped, allow_unknown=True)
    assert r.data["changed"] and r.data["pin"]["source"] == "local"
    # the local pin is exactly the pin the test manifest has for this file
    test_pin = m.load_file(TEST_MANIFEST).by_pristine(kit.sha256_hex(data))
    assert r.data["pin"]["patched_sha256"] == test_pin.patched_sha256
    assert commands.verify.run(venv, manifest=shipped).exit_code == 0
    assert commands.revert.run(venv, manifest=shipped).data["restored"]
    assert target.read_bytes() == data


def test_shipped_manifest_pins_every_shared_file():
    rows = kit.shared_engines()
    if not rows:
        pytest.skip("../shared/engines is absent")
    shipped = m.load(use_env=False)
    for row in rows:
        pin = shipped.by_pristine(row.sha256)
        assert pin is not None and pin.patch_id == PATCH_ID and row.commit[:8] in pin.label
        assert pin.size == row.size


# -- a set of two real files: a real ple_layer.py and the real start-up policy ------------------------

from ple4patch.paths import POLICY_REL, TARGET_REL  # noqa: E402

sys.path.insert(0, str(kit.REPO))
from tools import engine_corpus  # noqa: E402

REAL_POLICY = engine_corpus.stored("main-51c0f972", "runtime_defaults.py")  # 1CatAI/1Cat-vLLM 51c0f972


def real_policy() -> bytes:
    if not REAL_POLICY.is_file():
        pytest.skip(f"{REAL_POLICY} is not stored")
    return REAL_POLICY.read_bytes()


def test_shipped_manifest_pins_the_real_policy():
    from ple4patch.transform import patch_policy_source

    data = real_policy()
    pin = m.load(use_env=False).by_pristine(kit.sha256_hex(data))
    assert pin is not None and pin.target == POLICY_REL and "51c0f972" in pin.label
    assert kit.sha256_hex(patch_policy_source(data.decode()).encode()) == pin.patched_sha256


def test_real_set_cycle(wheelhouse, engine_venv):
    """The newest real layer of ../shared (15a8d185) with the real policy of 51c0f972 (no layer of
    that commit is stored: the pairing is the test's), both pinned by the shipped manifests."""
    rows = {r.commit[:8]: r for r in kit.shared_engines()}
    if "15a8d185" not in rows:
        pytest.skip("../shared/engines is absent")
    layer, policy = rows["15a8d185"].data, real_policy()
    venv = engine_venv(wheelhouse.engine_set(layer, policy, version="1.5.2.dev100"))
    shipped = m.load(use_env=False)
    site = kit.site_packages(venv)
    before = site_snapshot(venv, pycache=False)
    r = commands.status.run(venv, manifest=shipped)
    assert r.data["set"]["files"] == [TARGET_REL, POLICY_REL] and r.data["set"]["state"] == "pristine"
    r = commands.apply.run(venv, manifest=shipped, dry_run=True)
    assert "matches the pin" in r.message and f"+++ b/{POLICY_REL}" in r.output
    r = commands.apply.run(venv, manifest=shipped)
    assert [f["changed"] for f in r.data["files"]] == [True, True]
    for f in r.data["files"]:
        assert kit.sha(site / f["path"]) == f["pin"]["patched_sha256"]
    assert commands.verify.run(venv, manifest=shipped).exit_code == 0
    assert commands.revert.run(venv, manifest=shipped).data["set"]["state"] == "pristine"
    assert (site / POLICY_REL).read_bytes() == policy and (site / TARGET_REL).read_bytes() == layer
    assert site_snapshot(venv, pycache=False) == before

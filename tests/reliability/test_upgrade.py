"""Upgrades under a patched engine: pip replaces the target and leaves the backup behind.

A and B are the real engine files of ../shared/engines when present (the 1.5.0-era fork
file as 1cat-vllm 1.5.0, the 036318a0 file as 1.5.1; both pinned by the shipped manifest),
else the tests skip; stand-in variants (B unpinned) always run. Every step goes through
the real CLI and real pip; after every step the target is checked never to hold A's
bytes once B is installed.
"""

from __future__ import annotations

import subprocess

import pytest

import kit
from kit.fakepatch import PRISTINE_A
from ple4patch.errors import EXIT_ENGINE_NOT_FOUND, EXIT_UNPINNED, EXIT_VERIFY_FAILED
from ple4patch.paths import backup_path

REAL_A, REAL_B = "1cat-vllm-fork-a223f046", "1cat-vllm-main-036318a0"


def real_pair():
    rows = {r.folder: r for r in kit.shared_engines()}
    if REAL_A not in rows or REAL_B not in rows:
        pytest.skip("../shared/engines is absent")
    return rows[REAL_A].data, rows[REAL_B].data


def pip(venv, *args) -> None:
    proc = subprocess.run([kit.PY, "-m", "pip", "--python", str(kit.venv_python(venv)), *args,
                           "-q", "--no-deps", "--no-index"] if args[0] == "install" else
                          [kit.PY, "-m", "pip", "--python", str(kit.venv_python(venv)), *args, "-q"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def cli(*args, env):
    proc = kit.run_real(*args, "--json", env=env)
    return proc.returncode, kit.json_of(proc)


def upgrade_cycle(venv, a: bytes, b: bytes, wheel_b, env, *, b_pinned: bool) -> None:
    target = kit.target_of(venv)
    sha_a, sha_b = kit.sha256_hex(a), kit.sha256_hex(b)

    rc, d = cli("apply", venv, env=env)
    assert (rc, d["changed"]) == (0, True)
    kit.install(venv, wheel_b)  # pip uninstalls A (the patched file) and installs B
    assert kit.sha(target) == sha_b and kit.backup_sha(target) == sha_a

    def never_a():
        assert kit.sha(target) == sha_b or kit.sha(target) != sha_a  # B's file never gets A's bytes

    rc, d = cli("status", venv, env=env)
    assert rc == 0 and d["engine"]["version"] == "1.5.1"
    assert d["state"] == ("pristine" if b_pinned else "unpinned")
    assert d["backup"]["state"] == "stale" and d["backup"]["sha256"] == sha_a
    text = kit.run_real("status", venv, env=env).stdout
    assert "1cat-vllm 1.5.1" in text and "stale" in text
    assert "(it sets the stale backup aside, never restored)" in " ".join(text.split()), text

    rc, d = cli("verify", venv, env=env)
    assert rc == EXIT_VERIFY_FAILED and d["error"]["kind"] == "verify_failed"

    rc, d = cli("revert", venv, env=env)
    assert rc == 0 and d["restored"] is False and any("revert --clean" in n for n in d["notes"])
    assert kit.sha(target) == sha_b and kit.backup_sha(target) == sha_a
    never_a()

    rc, d = cli("revert", venv, "--clean", env=env)
    assert rc == 0 and d["restored"] is False
    assert kit.sha(target) == sha_b and not backup_path(target).exists()

    if not b_pinned:
        before = kit.tree_hash(venv)
        rc, d = cli("apply", venv, env=env)
        assert rc == EXIT_UNPINNED and "--allow-unknown" in d["error"]["message"]
        assert kit.tree_hash(venv) == before
    rc, d = cli("apply", venv, *([] if b_pinned else ["--allow-unknown"]), env=env)
    assert (rc, d["changed"]) == (0, True)
    assert kit.backup_sha(target) == sha_b
    assert cli("verify", venv, env=env)[0] == 0
    rc, d = cli("revert", venv, env=env)
    assert (rc, d["restored"]) == (0, True)
    assert kit.sha(target) == sha_b and not backup_path(target).exists() and kit.temps(target) == []


def test_real_engines_upgrade_a_to_b(wheelhouse, tmp_path):
    a, b = real_pair()
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine(a, version="1.5.0"))
    upgrade_cycle(venv, a, b, wheelhouse.engine(b, version="1.5.1"), kit.env_with(), b_pinned=True)


def test_real_engines_apply_right_after_upgrade(wheelhouse, tmp_path):
    """No revert --clean first: apply sets A's backup aside; revert then gives B's bytes back."""
    a, b = real_pair()
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine(a, version="1.5.0"))
    env = kit.env_with()
    target = kit.target_of(venv)
    assert cli("apply", venv, env=env)[0] == 0
    kit.install(venv, wheelhouse.engine(b, version="1.5.1"))
    rc, d = cli("apply", venv, env=env)
    assert (rc, d["changed"]) == (0, True) and any("set aside" in n for n in d["notes"])
    assert kit.backup_sha(target) == kit.sha256_hex(b)
    (aside,) = target.parent.glob(target.name + ".bak-pre-ple4.stale-*")
    assert aside.read_bytes() == a, "A's pristine bytes are kept, under another name"
    assert cli("verify", venv, env=env)[0] == 0
    rc, d = cli("revert", venv, env=env)  # a plain revert says the set-aside backup stays, and how to remove it
    assert (rc, d["restored"]) == (0, True) and aside.exists()
    assert any(str(aside) in n and "revert --clean" in n and "stay" in n for n in d["notes"]), d["notes"]
    assert target.read_bytes() == b and not backup_path(target).exists()
    assert cli("apply", venv, env=env)[0] == 0
    rc, d = cli("revert", venv, "--clean", env=env)
    assert (rc, d["restored"]) == (0, True)
    assert not any("stay" in n for n in d["notes"]), d["notes"]
    assert target.read_bytes() == b and not aside.exists() and not backup_path(target).exists()


def test_standin_upgrade_to_unpinned_b(wheelhouse, pinned, tmp_path):
    man, _pin = pinned
    a = kit.standin_bytes()
    b = a + b"\n# 1.5.1: a change the manifest does not know\n"
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine(a, version="1.5.0"))
    upgrade_cycle(venv, a, b, wheelhouse.engine(b, version="1.5.1"), kit.env_with([man]), b_pinned=False)


def test_uninstall_then_reinstall_same_version(wheelhouse, pinned, tmp_path):
    man, pin = pinned
    wheel = wheelhouse.engine(kit.standin_bytes(), version="1.5.1")
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheel)
    env = kit.env_with([man])
    target = kit.target_of(venv)
    assert cli("apply", venv, env=env)[0] == 0

    pip(venv, "uninstall", "-y", "1cat-vllm")
    assert not target.exists() and kit.backup_sha(target) == pin.pristine_sha256  # pip leaves ours
    before = kit.tree_hash(venv)
    for command in ("status", "apply", "verify", "revert"):
        rc, d = cli(command, venv, env=env)
        assert rc == EXIT_ENGINE_NOT_FOUND, (command, d)
        assert "not installed" in d["error"]["message"]
    assert kit.tree_hash(venv) == before

    pip(venv, "install", str(wheel))  # the same version again: pristine, and the old backup matches it
    rc, d = cli("status", venv, env=env)
    assert (d["state"], d["backup"]["state"]) == ("pristine", "present")
    assert cli("verify", venv, env=env)[0] == EXIT_VERIFY_FAILED
    rc, d = cli("apply", venv, env=env)
    assert (rc, d["changed"]) == (0, True)
    assert cli("verify", venv, env=env)[0] == 0

    pip(venv, "install", "--force-reinstall", str(wheel))  # a "repair" reinstall over the patched file
    assert kit.sha(target) == pin.pristine_sha256
    rc, d = cli("status", venv, env=env)
    assert (d["state"], d["backup"]["state"]) == ("pristine", "present")
    rc, d = cli("revert", venv, env=env)  # nothing to restore; the leftover backup goes
    assert (rc, d["restored"]) == (0, False) and not backup_path(target).exists()
    assert kit.sha(target) == pin.pristine_sha256


def fake_json(*args, env):
    proc = kit.fake_cli(*args, "--json", env=env)
    return proc.returncode, kit.json_of(proc)


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def test_uninstall_after_revert_leaves_no_vllm_package(wheelhouse, tmp_path):
    """ple4patch's lock and local pins live in the root of site-packages, not in the engine's
    package: after apply --allow-unknown, revert and pip uninstall, no stray `vllm` directory
    (an empty namespace package to Python) is left; a reinstall keeps the opt-in."""
    wheel = wheelhouse.engine(PRISTINE_A, version="1.5.0")
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheel)
    env = kit.env_with()  # nothing pins PRISTINE_A: --allow-unknown records a local pin
    site = kit.site_packages(venv)
    assert fake_json("apply", venv, "--allow-unknown", env=env)[0] == 0
    assert kit.fake_cli("revert", venv, env=env).returncode == 0
    pip(venv, "uninstall", "-y", "1cat-vllm")
    assert not (site / "vllm").exists(), files_under(site / "vllm")
    proc = subprocess.run([str(kit.venv_python(venv)), "-c", "import vllm"], capture_output=True, text=True)
    assert proc.returncode != 0 and "No module named 'vllm'" in proc.stderr
    rc, d = fake_json("status", venv, env=env)
    assert (rc, d["reason"]) == (EXIT_ENGINE_NOT_FOUND, "not_installed")
    assert "left over" not in d["error"]["message"]

    kit.install(venv, wheel)  # the same version again: the recorded opt-in stands
    rc, d = fake_json("status", venv, env=env)
    assert (rc, d["state"], d["pin"]["source"]) == (0, "pristine", "local")
    rc, d = fake_json("apply", venv, env=env)
    assert (rc, d["changed"]) == (0, True)


def test_uninstall_of_a_patched_engine_names_what_is_left(wheelhouse, tmp_path_factory, tmp_path):
    """pip leaves the backup (pip does not know it; the backup stays beside the target by
    contract), and nothing else of ple4patch's in the package; engine discovery says the engine
    is not installed and names the leftover folder Python would import as `vllm`."""
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine(PRISTINE_A, version="1.5.0"))
    env = kit.env_with([kit.fake_manifest_file(tmp_path_factory.getbasetemp())])
    site = kit.site_packages(venv)
    assert kit.fake_cli("apply", venv, env=env).returncode == 0
    pip(venv, "uninstall", "-y", "1cat-vllm")
    assert files_under(site / "vllm") == ["models/qwen4_exp/nvidia/ple_layer.py.bak-pre-ple4"]
    for command in ("status", "apply", "revert"):
        proc = kit.fake_cli(command, venv, env=env)
        assert proc.returncode == EXIT_ENGINE_NOT_FOUND
        line = kit.one_message(proc.stdout) if command == "status" else kit.error_message(proc, command)
        assert "1cat-vllm is not installed" in line
        assert any(f"{n} is left over" in line for n in kit.names_of(site / "vllm", venv)) and "ple_layer.py.bak-pre-ple4" in line, line
        assert "namespace package" in line and "reinstall 1cat-vllm" in line


# -- sets: releases with and without the start-up policy file -----------------------------------

from ple4patch.paths import POLICY_REL, TARGET_REL  # noqa: E402


@pytest.fixture(scope="session")
def set_pins(tmp_path_factory):
    return kit.standin_set_manifests(tmp_path_factory.getbasetemp())


def test_upgrade_to_a_release_with_the_policy_file(wheelhouse, set_pins, tmp_path):
    """1.5.1 (the layer alone, patched) -> 1.5.2 (the same layer and the policy file): the new
    set is pristine with a present layer backup; apply patches both, revert restores both."""
    mans, pins = set_pins
    env = kit.env_with(mans)
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine(kit.standin_bytes(), version="1.5.1"))
    rc, d = cli("apply", venv, env=env)
    assert (rc, d["set"]["files"]) == (0, [TARGET_REL])
    kit.install(venv, wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes(), version="1.5.2"))
    rc, d = cli("status", venv, env=env)
    assert d["set"] == {"files": [TARGET_REL, POLICY_REL], "state": "pristine", "journal": None, "journal_problem": None}
    assert d["files"][0]["backup"]["state"] == "present"
    assert cli("verify", venv, env=env)[0] == EXIT_VERIFY_FAILED
    rc, d = cli("apply", venv, env=env)
    assert rc == 0 and [f["changed"] for f in d["files"]] == [True, True]
    assert cli("verify", venv, env=env)[0] == 0
    rc, d = cli("revert", venv, env=env)
    assert rc == 0 and d["set"]["state"] == "pristine"
    site = kit.site_packages(venv)
    for rel in (TARGET_REL, POLICY_REL):
        assert kit.sha(site / rel) == pins[rel].pristine_sha256 and not backup_path(site / rel).exists()


def test_upgrade_to_a_release_without_the_policy_file(wheelhouse, set_pins, tmp_path):
    """A patched set, then an engine version without the policy file: pip removes the patched
    policy and leaves its backup; the new set is the layer alone, the orphan backup is named by
    status, never restored, and removed by `revert --clean`."""
    mans, pins = set_pins
    env = kit.env_with(mans)
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes(), version="1.5.2"))
    assert cli("apply", venv, env=env)[0] == 0
    kit.install(venv, wheelhouse.engine(kit.standin_bytes(), version="1.5.3"))
    site = kit.site_packages(venv)
    policy = site / POLICY_REL
    assert not policy.exists() and kit.backup_sha(policy) == pins[POLICY_REL].pristine_sha256
    rc, d = cli("status", venv, env=env)
    assert rc == 0 and d["set"]["files"] == [TARGET_REL]
    assert any("no longer has" in n and "revert --clean" in n for n in d["notes"])
    rc, d = cli("apply", venv, env=env)
    assert rc == 0 and d["changed"] and not policy.exists()
    rc, d = cli("revert", venv, env=env)
    assert rc == 0 and d["restored"] and backup_path(policy).exists()
    rc, d = cli("revert", venv, "--clean", env=env)
    assert rc == 0 and not backup_path(policy).exists() and not policy.exists()
    assert kit.sha(site / TARGET_REL) == pins[TARGET_REL].pristine_sha256


def test_upgrade_of_a_patched_set_to_unpinned_files(wheelhouse, set_pins, tmp_path):
    """Both files change in the new version (unpinned): both old backups are stale, apply
    refuses until --allow-unknown, then sets both aside and patches both."""
    mans, _pins = set_pins
    env = kit.env_with(mans)
    layer_b = kit.standin_bytes() + b"\n# 1.5.3\n"
    policy_b = kit.standin_policy_bytes() + b"\n# 1.5.3\n"
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes(), version="1.5.2"))
    assert cli("apply", venv, env=env)[0] == 0
    kit.install(venv, wheelhouse.engine_set(layer_b, policy_b, version="1.5.3"))
    rc, d = cli("status", venv, env=env)
    assert [f["state"] for f in d["files"]] == ["unpinned", "unpinned"]
    assert [f["backup"]["state"] for f in d["files"]] == ["stale", "stale"]
    before = kit.tree_hash(venv)
    rc, d = cli("apply", venv, env=env)
    assert rc == EXIT_UNPINNED and kit.tree_hash(venv) == before
    rc, d = cli("apply", venv, "--allow-unknown", env=env)
    assert rc == 0 and [f["changed"] for f in d["files"]] == [True, True]
    assert sum("set aside" in n for n in d["notes"]) == 2
    assert cli("verify", venv, env=env)[0] == 0


@pytest.fixture(scope="session")
def config_set_pins(tmp_path_factory):
    return kit.standin_config_set_manifests(tmp_path_factory.getbasetemp())


def test_upgrade_to_a_config_module_that_no_longer_places_the_table(wheelhouse, config_set_pins, tmp_path):
    """A patched config-era set (layer + vllm/config/vllm.py), then an engine version whose
    vllm/config/vllm.py no longer defines a PLE default: pip writes the new module and leaves the
    old backup. The new module is not a member (the stale backup does not keep it in the set): the
    set is the layer, the old backup an orphan named by status, never restored, and `apply`
    patches the layer as for any upgrade; `revert --clean` removes the orphan."""
    from ple4patch.paths import CONFIG_REL

    mans, pins = config_set_pins
    env = kit.env_with(mans)
    venv = kit.make_venv(tmp_path / "venv")
    kit.install(venv, wheelhouse.engine_config_era(kit.standin_bytes(), kit.config_era_bytes(), version="1.5.0"))
    assert cli("apply", venv, env=env)[0] == 0
    plain = b"# the VllmConfig module of a later release: no PLE default here\nX = 1\n"
    kit.install(venv, wheelhouse.engine_config_era(kit.standin_bytes(), plain, version="1.5.1"))
    site = kit.site_packages(venv)
    config = site / CONFIG_REL
    assert config.read_bytes() == plain and kit.backup_sha(config) == pins[CONFIG_REL].pristine_sha256
    rc, d = cli("status", venv, env=env)
    assert rc == 0 and d["set"]["files"] == [TARGET_REL], d
    assert any("no longer places the PLE table" in n and "revert --clean" in n for n in d["notes"]), d["notes"]
    rc, d = cli("apply", venv, env=env)
    assert rc == 0 and d["changed"] and config.read_bytes() == plain, d
    assert cli("verify", venv, env=env)[0] == 0
    rc, d = cli("revert", venv, "--clean", env=env)
    assert rc == 0 and not backup_path(config).exists() and config.read_bytes() == plain
    assert kit.sha(site / TARGET_REL) == pins[TARGET_REL].pristine_sha256

"""The CLI end to end (subprocesses), exit codes, --json, crash points, and the manifest pin check."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kit
from kit import TEST_MANIFEST, cli_env, run_cli, standin_bytes
from ple4patch import cli, errors
from ple4patch.fsio import APPLY_FAULT_POINTS, FAULT_POINTS, REVERT_FAULT_POINTS
from ple4patch.paths import backup_path
from ple4patch.sentinel import PATCH_ID

@pytest.fixture
def standin_venv(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine(standin_bytes(), version="1.5.1.dev945+gfe67339dd"))


def jrun(*args, env=None):
    proc = run_cli(*args, "--json", env=env)
    data = kit.validate(json.loads(proc.stdout))
    assert data["schema_version"] == 1 and data["exit_code"] == proc.returncode
    return proc.returncode, data


def test_cli_cycle_json(standin_venv):
    env = cli_env([TEST_MANIFEST])
    target = kit.target_of(standin_venv)
    pristine = target.read_bytes()
    rc, d = jrun("status", standin_venv, env=env)
    assert (rc, d["state"], d["engine"]["version"]) == (0, "pristine", "1.5.1.dev945+gfe67339dd")
    rc, d = jrun("apply", standin_venv, "--dry-run", env=env)
    assert rc == 0 and d["dry_run"] and d["diff"].startswith("--- a/") and target.read_bytes() == pristine
    rc, d = jrun("apply", standin_venv, env=env)
    assert (rc, d["changed"], d["state"]) == (0, True, "patched")
    rc, d = jrun("apply", standin_venv, env=env)
    assert (rc, d["changed"]) == (0, False)
    rc, d = jrun("verify", standin_venv, env=env)
    assert rc == 0 and d["ok"]
    rc, d = jrun("revert", standin_venv, env=env)
    assert (rc, d["restored"]) == (0, True)
    assert target.read_bytes() == pristine and not backup_path(target).exists()
    rc, d = jrun("verify", standin_venv, env=env)
    assert rc == errors.EXIT_VERIFY_FAILED and d["error"]["kind"] == "verify_failed"


def test_apply_and_revert_json_report_the_files_after_the_run(standin_venv):
    """The state, patch id, hashes and backup in apply's and revert's JSON are the files' after the
    run (what a CI check reads), each file's state before it beside them."""
    env = cli_env([TEST_MANIFEST])
    target = kit.target_of(standin_venv)
    pristine = kit.sha256_hex(target.read_bytes())
    rc, d = jrun("apply", standin_venv, env=env)
    patched = kit.sha256_hex(target.read_bytes())
    assert (rc, d["state_before"], d["state"], d["patch_id"]) == (0, "pristine", "patched", PATCH_ID)
    assert d["hashes"]["current"] == patched != pristine and d["backup"]["state"] == "present"
    assert d["backup"]["sha256"] == pristine and d["files"][0]["state_before"] == "pristine"
    assert d["files"][0]["hashes"]["current"] == patched and d["files"][0]["changed"] is True
    rc, d = jrun("revert", standin_venv, env=env)
    assert (rc, d["state_before"], d["state"], d["patch_id"]) == (0, "patched", "pristine", None)
    assert d["hashes"]["current"] == pristine and d["backup"]["state"] == "absent"
    assert d["files"][0]["backup"]["state"] == "absent" and d["files"][0]["restored"] is True


def test_cli_text_and_virtual_env_default(standin_venv):
    env = cli_env([TEST_MANIFEST], VIRTUAL_ENV=str(standin_venv))
    proc = run_cli("apply", "--dry-run", env=env)
    assert proc.returncode == 0
    assert proc.stdout.startswith("--- a/vllm/models/qwen4_exp/nvidia/ple_layer.py")
    assert "dry run: nothing written" in proc.stdout
    proc = run_cli("status", env=env)
    assert proc.returncode == 0 and "state:   pristine" in proc.stdout


def test_cli_unknown_file_exit_code_then_allow_unknown(standin_venv):
    env = cli_env()  # the shipped manifest only: the stand-in is unknown to it
    proc = run_cli("apply", standin_venv, env=env)
    assert proc.returncode == errors.EXIT_UNPINNED
    err = kit.error_message(proc, "apply")
    assert "--dry-run" in err and "--allow-unknown" in err
    assert run_cli("apply", standin_venv, "--allow-unknown", env=env).returncode == 0
    for cmd in ("apply", "verify", "revert"):
        assert run_cli(cmd, standin_venv, env=env).returncode == 0, cmd
    rc, d = jrun("status", standin_venv, env=env)
    assert d["state"] == "pristine" and d["pin"]["source"] == "local"


def test_cli_refusals(tmp_path, new_venv):
    rc, d = jrun("apply", tmp_path / "missing")
    assert rc == errors.EXIT_ENGINE_NOT_FOUND and d["error"]["reason"] == "no_venv"
    rc, d = jrun("status", new_venv())
    assert rc == errors.EXIT_ENGINE_NOT_FOUND and d["state"] == "not_installed"
    # the same error object as every other command's JSON
    assert d["error"]["kind"] == "engine_not_found" and d["error"]["reason"] == d["reason"] == "not_installed"
    assert "1cat-vllm is not installed" in d["error"]["message"]
    proc = run_cli("apply", "--no-such-option")
    assert proc.returncode == errors.EXIT_USAGE
    proc = run_cli("apply", tmp_path / "missing")
    assert proc.returncode == errors.EXIT_ENGINE_NOT_FOUND
    assert proc.stderr.startswith("ple4patch apply: error: no such venv")


def test_an_anchor_the_engine_file_lacks_is_a_transform_error(wheelhouse, engine_venv):
    """An installed engine file as shipped (unpinned: opted in with --allow-unknown) that lacks
    an anchor of the transform (the stand-in without Qwen4ExpNGramEmbedding.load_weights, which
    the transform wraps): kind `transform`, exit 5, the anchor named, nothing written."""
    text = standin_bytes().replace(b"    def load_weights(", b"    def load_weights_renamed(")
    venv = engine_venv(wheelhouse.engine(text))
    before = kit.tree_hash(venv)
    env = cli_env()  # the shipped manifest only: the file is unpinned
    for args in (("--allow-unknown",), ("--dry-run",), ("--dry-run", "--allow-unknown")):
        rc, d = jrun("apply", venv, *args, env=env)
        assert (rc, d["error"]["kind"]) == (errors.EXIT_MODIFIED, "transform"), (args, d)
        assert d["error"]["message"] == d["message"]
        assert "does not fit" in d["message"] and "anchor 'Qwen4ExpNGramEmbedding.load_weights'" in d["message"]
        proc = run_cli("apply", venv, *args, env=env)
        assert proc.returncode == errors.EXIT_MODIFIED
        assert "Qwen4ExpNGramEmbedding.load_weights" in kit.error_message(proc, "apply")
    assert kit.tree_hash(venv) == before
    rc, d = jrun("verify", venv, env=env)  # verify runs no transform: the file is unpinned, not patched
    assert (rc, d["error"]["kind"]) == (errors.EXIT_VERIFY_FAILED, "verify_failed")


def test_bad_extra_manifest_is_a_usage_error(standin_venv, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, d = jrun("status", standin_venv, env=cli_env([bad]))
    assert rc == errors.EXIT_USAGE and "bad.json" in d["error"]["message"]


def test_unexpected_exception_is_internal_error(capsys):
    def boom():
        raise RuntimeError("kaboom")

    with pytest.raises(SystemExit) as info:
        cli.run_command("status", False, boom)
    assert info.value.code == errors.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "internal error" in err and "kaboom" in err and "report" in err


def test_status_imports_no_libcst_torch_or_engine(standin_venv):
    code = (
        "import sys\n"
        "from ple4patch.cli import main\n"
        "try:\n"
        f"    main(['status', {str(standin_venv)!r}, '--json'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('libcst', 'torch', 'triton', 'vllm', 'numpy'))\n"
        "print('HEAVY', bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env([TEST_MANIFEST]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("HEAVY []")


def test_python_dash_m_and_version():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("ple4patch, version")
    assert proc.stdout.strip().endswith(f"(writes patch id {PATCH_ID})")  # what `revert with the ple4patch that made X` needs


def test_fault_points_cover_both_commands():
    assert set(APPLY_FAULT_POINTS) | set(REVERT_FAULT_POINTS) == set(FAULT_POINTS)


@pytest.mark.parametrize("point", [p for p in FAULT_POINTS if p != "after-pins"])
def test_killed_apply_then_revert_leave_a_whole_file(point, standin_venv):
    """SIGKILL apply/revert at each writing step: the target is always whole, a re-run finishes."""
    env = cli_env([TEST_MANIFEST])
    target = kit.target_of(standin_venv)
    pristine = target.read_bytes()
    proc = run_cli("apply", standin_venv, env={**env, "PLE4PATCH_FAULT": point})
    assert proc.returncode == (-9 if point in APPLY_FAULT_POINTS else 0), proc.stderr
    patched_or_not = target.read_bytes()
    rc, d = jrun("status", standin_venv, env=env)
    assert d["state"] in ("pristine", "patched")
    assert (patched_or_not == pristine) == (d["state"] == "pristine")
    assert run_cli("apply", standin_venv, env=env).returncode == 0
    assert run_cli("verify", standin_venv, env=env).returncode == 0
    assert not list(target.parent.glob(".ple4patch-tmp-*"))

    proc = run_cli("revert", standin_venv, env={**env, "PLE4PATCH_FAULT": point})
    assert proc.returncode == (-9 if point in REVERT_FAULT_POINTS else 0), proc.stderr
    rc, d = jrun("status", standin_venv, env=env)
    assert d["state"] in ("pristine", "patched")
    assert run_cli("revert", standin_venv, env=env).returncode == 0
    assert target.read_bytes() == pristine and not backup_path(target).exists()


def test_killed_allow_unknown_apply_after_pins(standin_venv):
    env = cli_env()
    target = kit.target_of(standin_venv)
    proc = run_cli("apply", standin_venv, "--allow-unknown", env={**env, "PLE4PATCH_FAULT": "after-pins"})
    assert proc.returncode == -9
    rc, d = jrun("status", standin_venv, env=env)
    assert d["state"] == "pristine" and d["pin"]["source"] == "local"
    assert run_cli("apply", standin_venv, env=env).returncode == 0
    assert run_cli("verify", standin_venv, env=env).returncode == 0
    assert target.is_file()


def test_shipped_manifest_is_up_to_date_with_the_transform():
    """Fails when the transform's output changed and `make pin` was not run."""
    proc = subprocess.run(
        [sys.executable, str(kit.REPO / "tools" / "pin_manifest.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date: ple4patch/patches/ple_layer.json" in proc.stdout
    assert "up to date: tests/fixtures/standin_manifest.json" in proc.stdout
    assert "up to date: ple4patch/patches/vllm_config.json" in proc.stdout
    assert "up to date: tests/fixtures/standin_config_manifest.json" in proc.stdout


def test_concurrent_applies_serialise(standin_venv):
    env = cli_env([TEST_MANIFEST])
    procs = [
        subprocess.Popen([sys.executable, "-m", "ple4patch", "apply", str(standin_venv), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=kit.REPO)
        for _ in range(3)
    ]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert [r["exit_code"] for r in results] == [0, 0, 0]
    assert sorted(r["changed"] for r in results) == [False, False, True]
    assert run_cli("verify", standin_venv, env=env).returncode == 0


_HOLD_LOCK = ("import fcntl, os, sys, time\n"
              "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
              "fcntl.flock(fd, fcntl.LOCK_EX)\n"
              "print('held', flush=True)\n"
              "time.sleep(60)\n")


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_held_lock_is_waited_for_out_loud(standin_venv, as_json):
    """After about a second of waiting, one line on stderr: the lock, who holds it, how long;
    never in --json's stdout. A wait shorter than that says nothing."""
    from ple4patch.paths import LOCK_NAME

    lock = kit.site_packages(standin_venv) / LOCK_NAME
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        extra = ("--json",) if as_json else ()
        proc = run_cli("apply", standin_venv, *extra, env={**cli_env([TEST_MANIFEST]), "PLE4PATCH_LOCK_TIMEOUT": "2.5"})
        assert proc.returncode == errors.EXIT_LOCK_TIMEOUT, proc
        waiting = [line for line in kit.logical_lines(proc.stderr) if "waiting for the lock" in line]
        assert len(waiting) == 1, proc.stderr  # said once, within 100 columns
        assert all(len(line) <= 100 or " " not in line.strip() for line in proc.stderr.splitlines()), proc.stderr
        assert waiting[0].startswith("ple4patch: waiting for the lock ") and kit.mentions(waiting[0], lock, standin_venv)
        assert f", held by pid {holder.pid} (python -c import fcntl" in waiting[0], waiting
        assert waiting[0].endswith(", for up to 2.5 s ($PLE4PATCH_LOCK_TIMEOUT)")
        if as_json:
            assert "waiting" not in proc.stdout and json.loads(proc.stdout)["error"]["kind"] == "lock_timeout"
        quick = run_cli("apply", standin_venv, env={**cli_env([TEST_MANIFEST]), "PLE4PATCH_LOCK_TIMEOUT": "0.5"})
        assert quick.returncode == errors.EXIT_LOCK_TIMEOUT and "waiting" not in quick.stderr, quick
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("value", ["abc", "nan", "-1", "1e309", "inf"])
def test_a_bad_lock_timeout_is_a_usage_error(standin_venv, value):
    """$PLE4PATCH_LOCK_TIMEOUT that is not a finite number of seconds, 0 or more, is refused
    (exit 2, the variable and its value named), never read as the default or as 0."""
    before = kit.sha256_hex(kit.target_of(standin_venv).read_bytes())
    proc = run_cli("apply", standin_venv, env={**cli_env([TEST_MANIFEST]), "PLE4PATCH_LOCK_TIMEOUT": value})
    assert proc.returncode == errors.EXIT_USAGE, proc
    words = " ".join(proc.stderr.split())
    assert f"$PLE4PATCH_LOCK_TIMEOUT must be a number of seconds, 0 or more, got {value!r}" in words, proc.stderr
    assert kit.sha256_hex(kit.target_of(standin_venv).read_bytes()) == before

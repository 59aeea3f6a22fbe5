"""One JSON envelope: every command's --json output, results and errors, validated against the
schema shipped in the package (ple4patch/schema/output.schema.json); the schema itself checked
(it rejects what breaks the envelope, it names every exit code, it ships in the wheel)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile

import pytest
from click.testing import CliRunner

import kit
from kit import TEST_MANIFEST, cli_env, standin_bytes
from ple4patch import errors, schema
from ple4patch.cli import main
from ple4patch.paths import backup_path

ENVELOPE = ("schema_version", "command", "ok", "exit_code", "message")


def invoke(*args, env: dict | None = None) -> dict:
    """`ple4patch ARGS --json` in-process: the object, validated, with its exit code checked."""
    res = CliRunner().invoke(main, [*map(str, args), "--json"], env=env)
    try:
        data = json.loads(res.stdout)
    except ValueError:
        raise AssertionError(f"not JSON (exit {res.exit_code}): {res.stdout!r}") from res.exception
    assert data["exit_code"] == res.exit_code, data
    assert list(data)[: len(ENVELOPE)] == list(ENVELOPE), "the envelope's keys come first, in order"
    return kit.validate(data)


@pytest.fixture
def standin_venv(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine(standin_bytes(), version="1.5.1"))


@pytest.fixture
def env(standin_venv):
    return {"PLE4PATCH_EXTRA_MANIFESTS": str(TEST_MANIFEST), "VIRTUAL_ENV": None}


def test_engine_commands_results_and_errors(standin_venv, env, tmp_path, new_venv):
    target = kit.target_of(standin_venv)
    seen = {}

    def run(*args, want: int) -> dict:
        d = invoke(*args, env=env)
        assert d["exit_code"] == want, d
        seen[(d["command"], d["exit_code"])] = d
        return d

    assert run("status", standin_venv, want=0)["state"] == "pristine"
    d = run("verify", standin_venv, want=errors.EXIT_VERIFY_FAILED)
    assert d["error"]["kind"] == "verify_failed" and d["message"] == d["error"]["message"]
    d = run("apply", standin_venv, "--dry-run", want=0)
    assert d["diff"].startswith("--- a/") and sum(r["added"] for r in d["regions"]) > 0
    assert run("apply", standin_venv, want=0)["changed"] is True
    assert run("apply", standin_venv, want=0)["changed"] is False
    assert run("apply", standin_venv, "--dry-run", want=0)["diff"] == ""
    assert run("verify", standin_venv, want=0)["state"] == "patched"
    assert run("revert", standin_venv, want=0)["restored"] is True
    assert run("revert", standin_venv, want=0)["restored"] is False
    assert not backup_path(target).exists()

    d = run("apply", tmp_path / "missing", want=errors.EXIT_ENGINE_NOT_FOUND)
    assert (d["error"]["kind"], d["error"]["reason"]) == ("engine_not_found", "no_venv")
    d = run("status", new_venv("bare"), want=errors.EXIT_ENGINE_NOT_FOUND)
    assert (d["state"], d["error"]["reason"]) == ("not_installed", "not_installed")
    for command in ("verify", "revert"):
        d = run(command, tmp_path / "missing", want=errors.EXIT_ENGINE_NOT_FOUND)
        assert d["error"]["reason"] == "no_venv"
    target.write_bytes(target.read_bytes() + b"\n# edited by hand\n")
    d = run("apply", standin_venv, want=errors.EXIT_MODIFIED)
    assert d["error"]["kind"] == "modified"
    # the shipped manifest alone does not know the stand-in
    d = invoke("apply", standin_venv.parent / "nope", env={"VIRTUAL_ENV": None})
    assert d["error"]["kind"] == "engine_not_found"


def test_unpinned_and_bad_manifest_errors(standin_venv, tmp_path):
    d = invoke("apply", standin_venv, env={"PLE4PATCH_EXTRA_MANIFESTS": None})
    assert (d["exit_code"], d["error"]["kind"]) == (errors.EXIT_UNPINNED, "unpinned")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    d = invoke("status", standin_venv, env={"PLE4PATCH_EXTRA_MANIFESTS": str(bad)})
    assert (d["exit_code"], d["error"]["kind"]) == (errors.EXIT_USAGE, "usage")


@pytest.mark.parametrize("args, command", [
    (["apply", "--no-such-option"], "apply"),
    (["status", "a", "b"], "status"),
    (["verify", "--frob"], "verify"),
    (["revert", "--clean=3"], "revert"),
    (["inspect"], "inspect"),
    (["inspect", ".", "--tp", "0"], "inspect"),
    (["selftest", "--gpu"], "selftest"),
    (["no-such-command"], None),
    (["apply", "--stat"], "apply"),
])
def test_usage_errors_give_the_envelope_with_exit_2(args, command):
    d = invoke(*args)
    assert (d["exit_code"], d["ok"], d["command"], d["error"]["kind"]) == (2, False, command, "usage")
    assert d["message"] == d["error"]["message"] and "--help" in d["message"]


def test_usage_error_without_json_stays_clicks_text():
    res = CliRunner().invoke(main, ["apply", "--no-such-option"])
    assert res.exit_code == 2 and "No such option" in res.stderr and res.stdout == ""


def test_inspect_results_and_errors(tmp_path, standin_venv, env):
    ckpt_factory = pytest.importorskip("ckpt_factory")
    good = ckpt_factory.make(tmp_path / "good", "nvfp4_rowpacked")
    d = invoke("inspect", good, "--tp", "2", env=env)
    assert d["exit_code"] == 0 and d["problems"] == [] and d["message"] == d["verdict"]
    d = invoke("inspect", good, standin_venv, env=env)  # the engine as the positional VENV
    assert d["engine"]["state"] == "pristine"
    bad = ckpt_factory.make(tmp_path / "bad", "nvfp4_split", dtype=None)
    d = invoke("inspect", bad, env=env)
    assert d["exit_code"] == errors.EXIT_CHECKPOINT and d["problems"] and d["error"]["kind"] == "checkpoint"
    d = invoke("inspect", tmp_path / "nope", env=env)
    assert (d["exit_code"], d["error"]["kind"]) == (errors.EXIT_USAGE, "usage")


def test_selftest_result_and_error(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    d = invoke("selftest")
    assert d["exit_code"] == 0 and d["report"]["ok"] is True
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    d = invoke("selftest", bare)
    assert (d["exit_code"], d["error"]["kind"]) == (errors.EXIT_SELFTEST_FAILED, "selftest_failed")
    d = invoke("selftest", tmp_path / "nonexistent")  # selftest looks for a Python, not an engine
    assert (d["exit_code"], d["error"]["kind"]) == (errors.EXIT_ENGINE_NOT_FOUND, "venv_not_found")
    assert "venv_not_found" in schema.load()["$defs"]["error"]["properties"]["kind"]["description"]


def test_interrupted_and_internal_errors_have_the_envelope(capsys):
    from ple4patch import cli

    def interrupted():
        raise KeyboardInterrupt

    def boom():
        raise RuntimeError("kaboom")

    for thunk, code, kind in ((interrupted, errors.EXIT_INTERRUPTED, "interrupted"), (boom, errors.EXIT_INTERNAL, "internal")):
        with pytest.raises(SystemExit) as info:
            cli.run_command("status", True, thunk)
        assert info.value.code == code
        d = kit.validate(json.loads(capsys.readouterr().out))
        assert (d["exit_code"], d["error"]["kind"]) == (code, kind)


def test_undecodable_path_bytes_are_escaped_listed_and_read_back():
    r"""A path holding bytes that are not UTF-8 (os.fsdecode: lone surrogates) comes out of the
    JSON as valid Unicode: each such byte `\xHH`, a backslash of its own `\\`, its place listed
    in `escaped_strings` (JSON Pointers); `json_text.unescape` gives the path's bytes back. The
    text for people keeps the path whole."""
    import os

    from ple4patch import json_text
    from ple4patch.result import Result

    raw = b"/tmp/a\\xff/\xff\xfe-\xc3\xa9 v"  # a literal backslash-x-f-f, then the bytes 0xff 0xfe
    path = os.fsdecode(raw)
    r = Result("status", 3, f"no venv at {path}", {"engine": {"venv": path, "version": "1.5.1"},
                                                    "files": [{"path": "vllm/x.py", "target": path}],
                                                    "odd/key~": path},
               error={"kind": "engine_not_found", "message": f"no venv at {path}"})
    d = r.to_json()
    text = json.dumps(d)
    json.loads(text)
    json.dumps(d, ensure_ascii=False).encode("utf-8")  # strict: no lone surrogate anywhere
    assert "\\udc" not in text
    assert d["escaped_strings"] == ["/message", "/engine/venv", "/files/0/target", "/odd~1key~0", "/error/message"]
    assert list(d)[-1] == "escaped_strings" and d["files"][0]["path"] == "vllm/x.py"
    assert d["engine"]["venv"] == "/tmp/a\\\\xff/\\xff\\xfe-\u00e9 v"
    for value in (d["engine"]["venv"], d["files"][0]["target"], d["odd/key~"]):
        assert os.fsencode(json_text.unescape(value)) == raw
    assert os.fsencode(json_text.unescape(d["message"])) == b"no venv at " + raw
    assert r.message == f"no venv at {path}" and r.data["engine"]["venv"] == path  # text: the path whole
    assert "escaped_strings" not in Result("status", 0, "state: pristine", {"engine": {"venv": "/v\\x"}}).to_json()
    other = "\ud800"  # a lone surrogate no fsdecode makes: \uHHHH, read back too
    assert json_text.unescape(json_text.escape_text(other + "\udcff\\")) == other + "\udcff\\"
    assert json_text.escape_text(other) == "\\ud800"


# -- the schema itself ---------------------------------------------------------


def _ok_status() -> dict:
    sha = "a" * 64
    return {
        "schema_version": 1, "command": "status", "ok": True, "exit_code": 0, "message": "state: pristine",
        "engine": {"venv": "/v", "site_packages": "/v/s", "dist_info": "/v/s/d", "distribution": "1cat-vllm",
                   "version": "1.5.1", "target": "/v/s/t"},
        "state": "pristine", "patch_id": None, "current_patch_id": "p", "pin": None,
        "hashes": {"current": sha, "record": sha, "pinned_pristine": None, "pinned_patched": None, "backup": None},
        "backup": {"state": "absent", "path": "/v/s/t.bak", "sha256": None}, "notes": [],
    }


@pytest.mark.parametrize("break_it, complaint", [
    (lambda d: d.pop("message"), "'message' is a required property"),
    (lambda d: d.update(ok=False), "True was expected"),
    (lambda d: d.update(exit_code=3, ok=False), "'error' is a required property"),
    (lambda d: d.update(exit_code=42), "is not one of"),
    (lambda d: d.update(error={"kind": "x", "message": "m"}), "False schema does not allow"),
    (lambda d: d.update(state="half-patched"), "is not one of"),
    (lambda d: d["hashes"].update(current="abc"), "is not valid under any"),
    (lambda d: d.update(command="apply"), "'changed' is a required property"),
    (lambda d: d.update(exit_code=2, ok=False, error={"message": "m"}), "'kind' is a required property"),
])
def test_schema_rejects_a_broken_envelope(break_it, complaint):
    good = _ok_status()
    assert kit.schema_errors(good) == []
    break_it(good)
    problems = kit.schema_errors(good)
    assert any(complaint in p for p in problems), problems


def test_schema_names_every_exit_code_and_error_kind():
    doc = schema.load()
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert codes == set(doc["$defs"]["exit_code"]["enum"])
    kinds = set()
    todo = [errors.Ple4Error]
    while todo:
        cls = todo.pop()
        kinds.add(cls.kind)
        todo += cls.__subclasses__()
    described = set(re.findall(r"[a-z_]+", doc["$defs"]["error"]["properties"]["kind"]["description"]))
    assert kinds <= described, kinds - described


def test_schema_ships_in_the_wheel(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), str(kit.REPO)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("ple4patch-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = json.loads(zf.read("ple4patch/schema/output.schema.json"))
    assert shipped == schema.load()


def test_a_two_file_set_validates(wheelhouse, engine_venv, tmp_path_factory):
    """The PLE layer and the start-up policy file: files[] and set in every command's JSON."""
    manifests, _pins = kit.standin_set_manifests(tmp_path_factory.getbasetemp())
    venv = engine_venv(wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes()))
    env = {"PLE4PATCH_EXTRA_MANIFESTS": ":".join(map(str, manifests)), "VIRTUAL_ENV": None}
    states = []
    for args in (["status"], ["apply", "--dry-run"], ["apply"], ["verify"], ["status"], ["revert"]):
        d = invoke(*args, venv, env=env)
        assert d["exit_code"] == 0, d
        states.append((len(d["files"]), d["set"]["state"]))
    assert states == [(2, "pristine"), (2, "pristine"), (2, "patched"), (2, "patched"), (2, "patched"),
                      (2, "pristine")]
    d = invoke("apply", "--dry-run", venv, env=env)
    assert {r["file"] for r in d["regions"]} == {"vllm/models/qwen4_exp/nvidia/ple_layer.py",
                                                "vllm/platforms/runtime_defaults.py"}

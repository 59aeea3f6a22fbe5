"""The Makefile's set-up is never silent: each step says what it does before pip runs, and pip
runs without -q (its own lines and progress show); what make prints fits 100 columns; `make try`
keeps a stand-in engine whose printed commands paste and run as said; the SIGINT-ignored run is
what .ci/run uses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import kit
from ple4patch.columns import WIDTH

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def dry_run(*targets: str, **variables: str) -> list[str]:
    args = [f"{k}={v}" for k, v in variables.items()]
    proc = subprocess.run(["make", "-n", *targets, *args], capture_output=True, text=True, cwd=kit.REPO)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace("\\\n", " ").splitlines()  # one line per recipe line


@pytest.mark.parametrize("target, venv_var", [("venv", "VENV"), ("test-triton-latest", "TL_VENV")])
def test_every_set_up_step_says_what_it_does_and_pip_is_not_quiet(tmp_path, target, venv_var):
    lines = dry_run(target, **{venv_var: str(tmp_path / "fresh")})
    steps = [i for i, line in enumerate(lines) if "==> " in line and "set-up" in line]
    installs = [i for i, line in enumerate(lines) if " -m pip install" in line or " -m venv " in line]
    assert installs and len(steps) >= len(installs)
    for i in installs:
        before = i - 1
        while before >= 0 and lines[before].startswith("printf '    %s"):  # the step's continuation lines
            before -= 1
        assert before in steps, f"no step line before: {lines[i]}"
        assert " -q" not in lines[i] and "--quiet" not in lines[i], lines[i]


def printed(target: str) -> list[str]:
    """What `make TARGET` prints of its own with the default venvs, every recipe run (-B): the
    recipe lines make echoes, and the step lines its `@printf`s write."""
    proc = subprocess.run(["make", "-n", "-B", target], capture_output=True, text=True, cwd=kit.REPO)
    assert proc.returncode == 0, proc.stderr
    out: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith("printf "):  # a step line: what it writes
            out += subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout.splitlines()
        else:
            out.append(line)
    return out


@pytest.mark.parametrize("target", ["demo", "try", "test-main", "test-triton-latest", "test-sigint-ignored",
                                    "pin", "bench-tool"])
def test_what_make_prints_fits_100_columns(target):
    lines = printed(target)
    assert any(line.startswith("==> ") for line in lines) or target == "test-sigint-ignored", lines
    wide = [f"{len(line)}: {line}" for line in lines if len(line) > WIDTH]
    assert wide == [], "\n".join(wide)


def test_make_try_runs_the_tool_after_a_step_line():
    lines = [line for line in printed("try") if line.strip()]
    i = next(i for i, line in enumerate(lines) if "tools/try_engine.py" in line)
    assert lines[i].endswith("tools/try_engine.py .try") and lines[i - 1].startswith("==> try: ")


def _try(top, *, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "tools/try_engine.py", str(top)], capture_output=True, text=True,
                          cwd=kit.REPO, env=kit.cli_env())
    assert proc.returncode == 0 or not check, proc.stderr
    return proc


def test_make_try_keeps_an_engine_and_its_commands_run_as_printed(tmp_path):
    """The tool behind `make try`: each step said, the venv and checkpoint kept, and the commands
    it prints, pasted into a shell from the repository root, run: status, dry run, apply, verify,
    inspect (the preflight says it will start), revert, each exit 0. Without the first (the
    manifest variable) apply refuses, exit 4, as the text says. Run again, it starts afresh; a
    directory it did not make is refused and left alone."""
    top = tmp_path / "try"
    out = _try(top).stdout
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("==> ")] == [
        f"==> try {n}/4" for n in range(1, 5)]
    assert all(len(line.replace(str(top), ".try")) <= WIDTH for line in out.splitlines()), out
    pasted = [line[2:] for line in out.split("From this directory:\n\n", 1)[1].split("\n\n")[0].splitlines()]
    assert pasted[0] == 'export PLE4PATCH_EXTRA_MANIFESTS="$PWD/tests/fixtures/standin_manifest.json"'
    venv, ckpt = top / "engine", top / "checkpoint"
    assert any(f" inspect {ckpt} {venv} " in f" {line} " for line in pasted), pasted
    env = {**kit.cli_env(), "PYTHONPATH": str(kit.REPO)}  # whichever ple4patch script: this checkout
    env.pop("PLE4PATCH_EXTRA_MANIFESTS", None)
    script = "set -e\n" + "\n".join(f"{line}; echo \"exit $? after: {line}\"" for line in pasted)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=kit.REPO, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("exit 0 after: ") == len(pasted), proc.stdout
    assert "WILL START" in proc.stdout and "reverted:" in proc.stdout
    apply_line = next(line for line in pasted if " apply " in f"{line} " and "--dry-run" not in line)
    unpinned = subprocess.run(["bash", "-c", apply_line], capture_output=True, text=True, cwd=kit.REPO, env=env)
    assert unpinned.returncode == 4, unpinned.stderr
    (venv / "note.txt").write_text("x")
    _try(top)  # afresh: what it made is replaced
    assert not (venv / "note.txt").exists() and (ckpt / "config.json").is_file()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    refused = _try(mine, check=False)
    assert refused.returncode == 2 and "nothing written" in refused.stderr
    assert "a directory that `make try` did not make" in " ".join(refused.stderr.split()), refused.stderr
    afile = tmp_path / "afile"
    afile.write_text("mine")
    refused = _try(afile, check=False)
    assert refused.returncode == 2 and "is not a directory" in " ".join(refused.stderr.split())
    assert afile.read_text() == "mine"
    assert sorted(os.listdir(mine)) == ["keep.txt"]


def test_ci_runs_the_ctrl_c_tests_with_sigint_ignored():
    ci = (kit.REPO / ".ci" / "run").read_text()
    assert "make test\n" in ci and "make test-sigint-ignored" in ci
    (recipe,) = [line for line in dry_run("test-sigint-ignored", VENV=str(kit.REPO / ".venv")) if "pytest" in line]
    assert recipe.startswith("trap '' INT;") and "PLE4PATCH_EXPECT_SIGINT_IGNORED=1" in recipe
    assert "-k 'ctrl_c or sigint'" in recipe


def test_the_demo_names_ple4patch_by_a_path_that_works():
    """`make demo` (tools/demo.py): every command it shows runs as shown from the repository root
    (the ple4patch beside its Python, not a bare name that may not be on PATH), it says what the
    `ple4patch` of the `next:` lines is, and every line it prints fits 100 columns."""
    env = {**kit.cli_env(), "PYTHONPATH": str(kit.REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "tools/demo.py"], capture_output=True, text=True, cwd=kit.REPO,
                          env=env, timeout=600)
    assert proc.returncode == 0 and "\ndemo: ok\n" in proc.stdout, proc.stdout + proc.stderr
    shown = [line[2:] for line in proc.stdout.splitlines() if line.startswith("$ ")]
    assert shown
    for command in shown:
        exe = command.split()[0]
        assert (kit.REPO / exe).is_file() or os.path.isfile(exe), f"{exe} does not run from {kit.REPO}"
    assert "names itself `ple4patch`" in proc.stdout and f"that is {shown[0].split()[0]}" in " ".join(
        proc.stdout.split())
    wide = [line for line in proc.stdout.splitlines() if len(line) > WIDTH and " " in line.strip()]
    assert wide == [], wide

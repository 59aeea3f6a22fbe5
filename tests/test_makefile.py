"""The Makefile's set-up is never silent: each step says what it does before pip runs, and pip
runs without -q (its own lines and progress show); the SIGINT-ignored run is what .ci/run uses."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import kit

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
        assert any(s == i - 1 for s in steps), f"no step line before: {lines[i]}"
        assert " -q" not in lines[i] and "--quiet" not in lines[i], lines[i]


def test_ci_runs_the_ctrl_c_tests_with_sigint_ignored():
    ci = (kit.REPO / ".ci" / "run").read_text()
    assert "make test\n" in ci and "make test-sigint-ignored" in ci
    (recipe,) = [line for line in dry_run("test-sigint-ignored", VENV=str(kit.REPO / ".venv")) if "pytest" in line]
    assert recipe.startswith("trap '' INT;") and "PLE4PATCH_EXPECT_SIGINT_IGNORED=1" in recipe
    assert "-k 'ctrl_c or sigint'" in recipe

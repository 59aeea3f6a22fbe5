"""`make test-triton-latest` fails when nothing ran or when it runs another Triton than it claims."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kit

TESTS = Path(__file__).resolve().parent


def run_pytest(tmp_path: Path, body: str, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(body)
    full = {k: v for k, v in os.environ.items() if not k.startswith("PLE4PATCH_")}
    full["PYTHONPATH"] = os.pathsep.join([str(TESTS), full.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "run_guards",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, cwd=tmp_path, env=full, timeout=120,
    )


ALL_SKIPPED = "import pytest\n\ndef test_a():\n    pytest.skip('no torch here')\n\ndef test_b():\n    pytest.skip('no torch')\n"
ONE_RAN = "import pytest\n\ndef test_a():\n    pytest.skip('gpu')\n\ndef test_b():\n    assert 1 + 1 == 2\n"


def test_all_skipped_fails_only_when_tests_must_run(tmp_path):
    proc = run_pytest(tmp_path, ALL_SKIPPED)
    assert proc.returncode == 0, proc.stdout  # pytest's own view: all skipped is a pass
    proc = run_pytest(tmp_path, ALL_SKIPPED, PLE4PATCH_TESTS_MUST_RUN="1")
    assert proc.returncode == 1, proc.stdout
    assert "no test ran (2 skipped, 0 passed)" in proc.stdout
    proc = run_pytest(tmp_path, ONE_RAN, PLE4PATCH_TESTS_MUST_RUN="1")
    assert proc.returncode == 0, proc.stdout


def test_expected_triton_version_is_checked_before_any_test(tmp_path):
    triton = pytest.importorskip("triton")
    proc = run_pytest(tmp_path, ONE_RAN, PLE4PATCH_EXPECT_TRITON="0.0.1")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert f"imports triton {triton.__version__}" in out and "PLE4PATCH_EXPECT_TRITON=0.0.1" in out
    assert "1 passed" not in out
    proc = run_pytest(tmp_path, ONE_RAN, PLE4PATCH_EXPECT_TRITON=triton.__version__)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def make_dry_run(*args: str) -> str:
    proc = subprocess.run(["make", "-n", "--no-print-directory", *args], capture_output=True, text=True,
                          cwd=kit.REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace("\\\n", " ")  # one line per command


@pytest.mark.skipif(not any(os.access(os.path.join(d, "make"), os.X_OK)
                            for d in os.environ.get("PATH", "").split(os.pathsep)), reason="no make")
def test_makefile_triton_latest_run_checks_its_triton_and_that_tests_ran():
    text = make_dry_run("test-triton-latest", "TL_STAMP=Makefile")  # the recipe only, no venv set-up
    (line,) = [ln for ln in text.splitlines() if "pytest" in ln]
    assert "PLE4PATCH_TESTS_MUST_RUN=1" in line and "tests/test_nvfp4_compile.py" in line
    m = re.search(r"PLE4PATCH_EXPECT_TRITON=(\S+)", line)
    assert m and m.group(1) == "3.9.0", line  # the version the README promises
    setup = make_dry_run("-B", "test-triton-latest", "TL_VENV=/nonexistent-venv")
    assert "triton==3.9.0" in setup
    readme = (kit.REPO / "README.md").read_text()
    assert "triton 3.9.0" in readme and "$ make test " in readme

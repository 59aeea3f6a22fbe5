"""`ple4patch selftest`: compile-only + interpreter path on the CPU (GPU path when CUDA exists)."""

import json
import os
import stat
import subprocess
import sys

import pytest

from ple4patch import selftest
from ple4patch.errors import EXIT_SELFTEST_FAILED, EngineNotFound, SelftestFailed, UsageError

pytest.importorskip("torch")
pytest.importorskip("triton")


def _fake_venv(tmp_path, script):
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    py = bindir / "python"
    py.write_text("#!/bin/sh\n" + script)
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    return str(tmp_path / "venv")


def test_selftest_current_python_compiles_for_sm70_and_is_exact():
    report = selftest.run_selftest(None, "sm_70")
    assert report["ok"] is True
    assert [c["target"] for c in report["compile"]] == ["sm_70"] * 3
    assert all("cubin" in c["asm"] for c in report["compile"])
    assert report["exactness"] and all(e["mismatches"] == 0 and e["values"] > 0 for e in report["exactness"])
    import torch

    assert report["mode"] == ("gpu" if torch.cuda.is_available() else "interpreter")
    assert "selftest passed" in selftest.format_text(report)


def test_selftest_other_arch_is_reported():
    report = selftest.run_selftest(None, "sm_75")
    assert {c["target"] for c in report["compile"]} == {"sm_75"}


def test_selftest_sm90_accepts_the_arch_specific_target():
    """Triton builds 90 and up as the arch-specific variant (PTX `.target sm_90a`)."""
    report = selftest.run_selftest(None, "sm_90a")
    assert report["ok"] is True and report["arch"] == "sm_90"
    assert {c["target"] for c in report["compile"]} == {"sm_90a"}


def test_arch_forms_accepted_and_refused_before_anything_compiles(tmp_path):
    for given in ("sm_70", "sm70", "70", "7.0", "SM_70", " sm_70 "):
        assert selftest.check_arch(given) == "sm_70"
    assert selftest.check_arch("sm_90a") == selftest.check_arch("9.0") == "sm_90"
    assert selftest.check_arch("sm_120") == "sm_120"
    # torch.cuda.get_device_capability's form for Blackwell: two-digit majors
    assert [selftest.check_arch(x) for x in ("10.0", "12.0", "12.1", "10.3", "10.0a")] == [
        "sm_100", "sm_120", "sm_121", "sm_103", "sm_100"]
    with pytest.raises(UsageError, match=r"got 'x{40}\.\.\.'; ptxas"):
        selftest.check_arch("x" * 1500)  # a long value is not echoed whole
    marker = tmp_path / "ran"
    venv = _fake_venv(tmp_path, f"touch {marker}\nexit 1\n")
    for bad in ("sm_7", "sm_71", "sm_80a", "sm_1000", "volta", "sm_"):
        with pytest.raises(UsageError, match=r"--arch: .*'" + bad + r"'.*ptxas knows sm_50 .* \(write it like sm_70\)"):
            selftest.run_selftest(venv, bad)
    assert not marker.exists()  # refused before the engine's Python ran


def test_cli_bad_arch_is_one_usage_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "ple4patch", "selftest", "--arch", "sm_7"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.startswith("ple4patch selftest: error: --arch: unknown architecture 'sm_7'")
    assert "ptxas fatal" not in proc.stderr and "AssertionError" not in proc.stderr


def test_an_arch_this_tritons_ptxas_does_not_know_is_a_usage_error():
    """sm_110 is a real architecture, unknown to the ptxas of CUDA 12.8 (Triton 3.6.0's)."""
    try:
        report = selftest.run_selftest(None, "sm_110")
    except UsageError as err:
        assert "for the ptxas of triton" in str(err) and "'sm_110a' is not defined" in str(err)
    else:
        pytest.skip(f"this Triton's ptxas knows sm_110 (report ok: {report['ok']})")


def test_selftest_venv_without_torch_points_at_the_engine_venv(tmp_path, monkeypatch):
    """The hint sends the user to the engine's venv; it never says to install torch (CUDA torch
    and ~20 nvidia-* wheels) into ple4patch's own environment."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    with pytest.raises(SelftestFailed, match=r"torch is not importable.*give the engine's venv") as info:
        selftest.run_selftest(str(venv), "sm_70")
    assert "pip install" not in str(info.value) and "[kernels]" not in str(info.value)
    monkeypatch.setattr(selftest.sys, "executable", str(venv / "bin" / "python"))  # no VENV: this Python
    with pytest.raises(SelftestFailed, match=r"run `ple4patch selftest VENV` with the engine's venv") as info:
        selftest.run_selftest(None, "sm_70")
    assert "pip install" not in str(info.value) and "do not install it there" in str(info.value)


def test_selftest_reports_mismatches_from_the_child(tmp_path):
    report = {
        "ok": False, "python": "x", "arch": "sm_70", "torch": "t", "triton": "3.6.0",
        "compile": [{"dtype": "float16", "ok": True, "target": "sm_70", "asm": ["ptx"]}],
        "exactness": [{"table": "cuda", "dtype": "float16", "values": 10, "mismatches": 3,
                        "first_mismatch": {"row": 1, "col": 2, "got": 1, "want": 2}}],
    }
    venv = _fake_venv(tmp_path, f"echo '{json.dumps(report)}'\nexit 1\n")
    with pytest.raises(SelftestFailed, match="3 of 10 float16 values differ"):
        selftest.run_selftest(venv, "sm_70")


def test_selftest_child_crash_is_a_failure(tmp_path):
    venv = _fake_venv(tmp_path, "echo boom >&2\nexit 3\n")
    with pytest.raises(SelftestFailed, match="exited 3 without a report: boom"):
        selftest.run_selftest(venv, "sm_70")


def test_selftest_bad_venv_and_arch(tmp_path):
    with pytest.raises(EngineNotFound, match="does not exist"):
        selftest.run_selftest(str(tmp_path / "nope"), "sm_70")
    with pytest.raises(EngineNotFound, match="no bin/python"):
        selftest.run_selftest(str(tmp_path), "sm_70")
    with pytest.raises(UsageError, match="--arch"):
        selftest.run_selftest(None, "volta")


def test_selftest_refuses_a_path_inside_a_venv_naming_its_root(tmp_path):
    """As status and apply do: `VENV/bin/python` is refused (exit 3) with VENV named."""
    venv = tmp_path / "my venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    for inside in (venv / "bin" / "python", venv / "lib"):
        with pytest.raises(EngineNotFound, match=f"did you mean {venv}\\? .*`ple4patch selftest '{venv}'`") as info:
            selftest.run_selftest(str(inside), "sm_70")
        assert info.value.kind == "venv_not_found"


def test_cli_selftest_json_and_exit_codes(tmp_path):
    from click.testing import CliRunner

    from ple4patch.cli import main

    res = CliRunner().invoke(main, ["selftest", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["schema_version"] >= 1 and data["command"] == "selftest" and data["ok"] is True
    assert data["report"]["compile"][0]["target"] == "sm_70"

    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    res = CliRunner().invoke(main, ["selftest", str(venv), "--json"])
    assert res.exit_code == EXIT_SELFTEST_FAILED
    assert json.loads(res.output)["error"]["kind"] == "selftest_failed"
    res = CliRunner().invoke(main, ["selftest", str(tmp_path / "nonexistent"), "--json"])
    assert res.exit_code == 3 and json.loads(res.output)["error"]["kind"] == "venv_not_found", res.output

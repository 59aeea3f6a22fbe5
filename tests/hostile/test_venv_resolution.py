"""The venv is resolved as its own interpreter does: VENV="" is a usage error, the
site-packages is the one of pyvenv.cfg's Python, and the dist-info is found in every spelling
of `1cat-vllm` that the interpreter's importlib.metadata finds, and in none it does not
(checked against it)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import kit
from kit.fakepatch import PRISTINE_A, PRISTINE_B
from ple4patch import commands
from ple4patch.engine import find_engine
from ple4patch.errors import EXIT_ENGINE_NOT_FOUND, EXIT_OK, EXIT_USAGE, EngineNotFound, UsageError


@pytest.mark.parametrize("command", ["apply", "status", "verify", "revert"])
def test_empty_venv_is_a_usage_error(command, cli_in, hroot, monkeypatch):
    monkeypatch.chdir(hroot)  # never the current directory
    code, out, err = cli_in(command, "")
    assert code == EXIT_USAGE and "VENV is empty" in kit.one_message(err, f"ple4patch {command}: error: "), (out, err)
    code, out, _ = cli_in(command, "", "--json")
    assert code == EXIT_USAGE and '"kind": "usage"' in out
    with pytest.raises(UsageError):
        find_engine("")


def _other_site(venv, name="python3.99"):
    other = venv / "lib" / name / "site-packages"
    other.parent.mkdir()
    shutil.copytree(kit.site_packages(venv), other, symlinks=True)
    return other


def test_site_packages_is_the_one_pyvenv_cfg_names(hvenv, cli_in):
    real = kit.site_packages(hvenv)
    other = _other_site(hvenv)
    (other / kit.TARGET_REL).write_bytes(PRISTINE_B)  # another Python's copy: not what runs
    assert find_engine(hvenv).site_packages == real
    assert cli_in("apply", hvenv)[0] == EXIT_OK
    assert (other / kit.TARGET_REL).read_bytes() == PRISTINE_B
    assert (real / kit.TARGET_REL).read_bytes() != PRISTINE_A


def test_engine_only_in_a_site_packages_the_python_does_not_import(hvenv):
    real = kit.site_packages(hvenv)
    _other_site(hvenv)
    for p in real.glob("1cat_vllm-*.dist-info"):
        shutil.rmtree(p)
    shutil.rmtree(real / "vllm")
    with pytest.raises(EngineNotFound) as info:
        find_engine(hvenv)
    assert info.value.reason == "not_installed" and str(real) in str(info.value)
    r = commands.status.run(hvenv)
    assert r.exit_code == EXIT_ENGINE_NOT_FOUND


SPELLINGS = ["1cat_vllm-1.5.0.dist-info", "1Cat_vLLM-1.5.0.dist-info", "1cat.vllm-1.5.0.dist-info",
             "1cat-vllm-1.5.0.dist-info", "1CAT__VLLM-1.5.0.dist-info", "1cat_vllm-1.5.0.DIST-INFO"]

_FOUND = "import importlib.metadata as m, sys; d = m.distribution('1cat-vllm'); print(d.version)"


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_dist_info_in_every_spelling_the_interpreter_finds(spelling, hvenv, cli_in):
    site = kit.site_packages(hvenv)
    (dist,) = site.glob("1cat_vllm-*.dist-info")
    dist.rename(site / spelling)
    proc = subprocess.run([str(kit.venv_python(hvenv)), "-c", _FOUND], capture_output=True, text=True,
                          env=kit.cli_env(), timeout=60)
    if spelling.startswith("1cat-vllm-"):  # not a name pip writes: the interpreter does not find it
        assert proc.returncode != 0 and "PackageNotFoundError" in proc.stderr
        with pytest.raises(EngineNotFound):
            find_engine(hvenv)
        return
    assert proc.returncode == 0 and proc.stdout.strip() == "1.5.0", proc.stderr  # the interpreter's view
    engine = find_engine(hvenv)
    assert engine.version == "1.5.0" and engine.dist_info.name == spelling
    assert cli_in("apply", hvenv)[0] == EXIT_OK


def test_wheel_named_in_another_spelling_installed_by_pip(wheelhouse, engine_venv, cli_in):
    venv = engine_venv(wheelhouse.engine(PRISTINE_A, version="1.5.0", name="1Cat.vLLM"))
    assert find_engine(venv).version == "1.5.0"
    assert cli_in("apply", venv)[0] == EXIT_OK

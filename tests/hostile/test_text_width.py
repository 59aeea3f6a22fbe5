"""Every text line fits 100 columns, in a venv whose path is as long as a user's.

Every command (status, status --verbose, apply, apply --dry-run, apply --dry-run --stat,
verify, revert, revert --clean, inspect CHECKPOINT_DIR VENV) runs in every target state x backup
state, for the PLE layer alone and for a set of two files (the layer and the start-up policy
file, both in that state), in a venv at a 72-character path (`hmatrix.long_venv_path`); and
once in that venv without an engine (the not-installed lines) and for selftest. Every line of
stdout and stderr is at most 100 columns, except a line that holds one word alone (a path
longer than a line, possibly ending in a shell continuation ` \\`): the README's one exception.
"""

from __future__ import annotations

import shutil

import pytest

import kit
from hmatrix import CASE_IDS, CASES, SET_FILES, build, long_venv_path, set_wheel, write_manifests
from kit.fakepatch import PRISTINE_A
from ple4patch.columns import CONTINUATION, WIDTH
from ple4patch.paths import TARGET_REL

ckpt_factory = pytest.importorskip("ckpt_factory")

COMMANDS = (("status",), ("status", "--verbose"), ("apply",), ("apply", "--dry-run"),
            ("apply", "--dry-run", "--stat"), ("verify",), ("revert",), ("revert", "--clean"), ("inspect",))


def too_wide(text: str) -> list[str]:
    """The lines of `text` wider than WIDTH that are not one word standing alone."""
    return [line for line in text.splitlines()
            if len(line) > WIDTH and " " in line.strip().removesuffix(CONTINUATION)]


def test_too_wide_knows_the_exception():
    assert too_wide("x" * 100 + "\n  " + "/p" * 60 + "\n    " + "/p" * 60 + CONTINUATION) == []
    assert too_wide("a " + "x" * 99) == ["a " + "x" * 99]


@pytest.fixture(scope="module")
def mans(tmp_path_factory):
    return write_manifests(tmp_path_factory.mktemp("width"))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return ckpt_factory.make(tmp_path_factory.mktemp("width-ckpt") / "Qwen3.8-Flash-Next-NVFP4", "nvfp4_rowpacked")


@pytest.fixture(scope="session")
def set_tpl(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "hostile-set", set_wheel(wheelhouse, "set"))


@pytest.fixture(scope="session")
def config_set_tpl(wheelhouse, tmp_path_factory):
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "hostile-config-set",
                        set_wheel(wheelhouse, "config-set"))


@pytest.fixture
def tpl_of(htpl, set_tpl, config_set_tpl):
    """The template venv of a kind of `SET_FILES`."""
    return {"layer": htpl, "set": set_tpl, "config-set": config_set_tpl}.__getitem__


def _run_all(venv, cli_in, man, ckpt, commands=COMMANDS) -> list[str]:
    """Every command once, each on a fresh copy of `venv`: what was too wide, with the command."""
    template = venv.parent / (venv.name + "-state")
    shutil.copytree(venv, template, symlinks=True)
    wide = []
    for command in commands:
        args = (command[0], ckpt, venv, *command[1:]) if command[0] == "inspect" else (*command, venv)
        code, out, err = cli_in(*args, manifests=man)
        assert code != 1, (command, out, err)
        wide += [f"{' '.join(command)}: {len(line)} columns: {line}" for line in too_wide(out + err)]
        shutil.rmtree(venv)
        shutil.copytree(template, venv, symlinks=True)
    shutil.rmtree(template)
    return wide


@pytest.mark.parametrize("files", list(SET_FILES))
@pytest.mark.parametrize(("state", "backup"), CASES, ids=CASE_IDS)
def test_every_line_fits_100_columns(files, state, backup, tpl_of, hroot, cli_in, mans, ckpt):
    venv = kit.clone(tpl_of(files), long_venv_path(hroot))
    assert len(str(venv)) == 72
    pinned, only_b = mans
    build(state, backup, venv, SET_FILES[files])
    wide = _run_all(venv, cli_in, only_b if state == "unpinned" else pinned, ckpt)
    assert wide == [], "\n".join(wide)


@pytest.mark.parametrize("files", ["set", "config-set"])
def test_a_mixed_set_fits_100_columns(files, tpl_of, hroot, cli_in, mans, ckpt):
    venv = kit.clone(tpl_of(files), long_venv_path(hroot))
    build("patched", "present", venv, (TARGET_REL,))
    assert _run_all(venv, cli_in, mans[0], ckpt) == []


def test_no_engine_and_selftest_fit_100_columns(hroot, cli_in, mans, ckpt):
    venv = long_venv_path(hroot)
    kit.make_venv(venv)  # a venv without 1cat-vllm
    wide = _run_all(venv, cli_in, mans[0], ckpt, COMMANDS + (("selftest",),))
    assert wide == [], "\n".join(wide)


@pytest.fixture(scope="session")
def config_tpl(wheelhouse, tmp_path_factory):
    """The layer and a vllm/config/vllm.py outside the set (its cascade alone, no default: the era
    before the policy file, Peuqui/1Cat-vLLM 0f580579's form): every command adds its one note on
    that file."""
    cascade_only = kit.config_era_bytes().replace(b"def _apply_sm70_qwen38_hybrid_ple_defaults(", b"def _other(")
    return kit.template(tmp_path_factory.getbasetemp(), wheelhouse, "hostile-config-era",
                        wheelhouse.engine_config_era(PRISTINE_A, cascade_only))


@pytest.mark.parametrize(("state", "backup"), [("pristine", "absent"), ("patched", "present")])
def test_the_config_era_note_fits_100_columns(state, backup, config_tpl, hroot, cli_in, mans, ckpt):
    venv = kit.clone(config_tpl, long_venv_path(hroot))
    build(state, backup, venv, (TARGET_REL,))
    code, out, _err = cli_in("status", venv, manifests=mans[0])
    assert code == 0 and "note:    vllm/config/vllm.py admits the PLE disk cascade by itself" in out, out
    assert _run_all(venv, cli_in, mans[0], ckpt) == []

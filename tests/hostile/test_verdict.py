"""`--json`'s `message` is the verdict, as the text output's last line(s), and `--verbose` names
every path whole.

For every target state x backup state, for the PLE layer alone and for a set of two files,
`status`, `apply`, `verify` and `revert` run twice on the same venv state: with `--verbose`
(paths and hashes whole, as in `--json`) and with `--json`. The text must end with the JSON
`message` (an error: `ple4patch COMMAND: error: MESSAGE`), line breaks aside; `status`'s
message is its verdict (state, notes, next step), not its details; with `--verbose` every file
of the set is named by its whole path (the `set:` line aside, which lists the set's members as
`set.files` does), and `status --verbose` names the target, and the backup when there is one.
"""

from __future__ import annotations

import json
import shutil

import pytest

import kit
from hmatrix import CASE_IDS, CASES, SET_FILES, build, set_wheel, write_manifests
from ple4patch.paths import TARGET_REL, backup_path

COMMANDS = (("status",), ("apply",), ("verify",), ("revert",))


@pytest.fixture(scope="module")
def mans(tmp_path_factory):
    return write_manifests(tmp_path_factory.mktemp("verdict"))


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


def words(text: str) -> str:
    return " ".join(" ".join(kit.logical_lines(text)).split())


@pytest.mark.parametrize("files", list(SET_FILES))
@pytest.mark.parametrize(("state", "backup"), CASES, ids=CASE_IDS)
def test_json_message_is_the_texts_verdict(files, state, backup, tpl_of, hroot, cli_in, mans):
    venv = kit.clone(tpl_of(files), hroot / "v")
    rels = SET_FILES[files]
    build(state, backup, venv, rels)
    man = mans[1] if state == "unpinned" else mans[0]
    template = hroot / "state"
    shutil.copytree(venv, template, symlinks=True)
    for command in COMMANDS:
        code, out, err = cli_in(*command, venv, "--verbose", manifests=man)
        shutil.rmtree(venv)
        shutil.copytree(template, venv, symlinks=True)
        jcode, jout, _ = cli_in(*command, venv, "--json", manifests=man)
        shutil.rmtree(venv)
        shutil.copytree(template, venv, symlinks=True)
        d = json.loads(jout)
        assert (code, d["exit_code"]) == (jcode, jcode), (command, out, err)
        text = out + err
        said = d["message"] if err == "" else f"ple4patch {command[0]}: error: {d['message']}"
        assert words(text).endswith(words(said)), f"{command}: {said!r} is not how\n{text}\nends"
        site = kit.site_packages(venv)
        for line in kit.logical_lines(text):
            if line.startswith("set:"):  # the set's member names, as set.files in --json
                continue
            for rel in rels:
                bare = line.replace(f"{site}/{rel}", "")
                assert rel not in bare, f"{command} --verbose names {rel} without its directory: {line}"
        if command == ("status",):
            assert "sha256:" not in d["message"] and "engine:" not in d["message"], d["message"]
            assert d["message"].startswith("state:" if files == "layer" else "set:"), d["message"]
            site = kit.site_packages(venv)
            assert f"target: {site / TARGET_REL} " in words(out), out
            for rel in rels:
                assert (str(backup_path(site / rel)) in out.split()) == (backup != "absent"), out

"""Every next step a message suggests is true, and following it loses nothing.

For every target state x backup state, every command runs once, in a venv whose path is as long
as a user's (`hmatrix.long_venv_path`, about 70 characters, so that the text wraps); each
suggested step in what it says (a `ple4patch ...` command, "move it away", "reinstall the
engine", "then apply") becomes a chain of actions, read from the text as printed: continuation
lines joined, a command continued shell-style (` \\`) joined as a shell joins it, the venv path
it names checked to be the venv's. Each chain runs on a fresh copy of that venv. Each suggested
ple4patch command must then do what was said (exit 0), and a file at the backup path that
matches no known pristine file (`corrupt`: maybe the user's own) is never removed, moved or
written over by any command, `revert --clean` included: only the user moves it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import kit
from hmatrix import CASE_IDS, CASES, COMMANDS, CORRUPT, build, long_venv_path, write_manifests
from kit.fakepatch import PRISTINE_A
from ple4patch.errors import EXIT_OK
from ple4patch.paths import backup_path

_CMD = re.compile(r"ple4patch (apply|revert|verify|status)((?: --[a-z-]+)*)(?!:)|`(revert --clean|apply --allow-unknown"
                  r"|apply --dry-run)`|(then apply)|([Mm]ove (?:it|\S+)(?: \(in \S+\))? away)|(reinstall the engine|Restore the "
                  r"engine with pip|pip install --force-reinstall)")
_VENV_COMMAND = re.compile(r"ple4patch (?:apply|revert|verify)(?: --[a-z-]+)*(?!:)")
_PIP = "pip install --force-reinstall --no-deps '1cat-vllm=="


def assert_pastes(text: str, venv: Path) -> None:
    """Every suggested ple4patch command names the venv on its own shell line, and a pip
    reinstall names its requirement there: copied as printed, it runs as meant."""
    for line in kit.shell_lines(text):
        for m in _VENV_COMMAND.finditer(line):
            assert line[m.end():].startswith(f" {venv}"), f"{m.group(0)!r} does not name {venv} as printed: {text}"
        if "pip install --force-reinstall" in line:
            assert _PIP in line, f"a pip command broken over lines: {text}"


def suggestions(text: str) -> list[tuple[str, ...]]:
    """The action chains a text suggests: one per logical line, the actions in their order."""
    chains = []
    for line in kit.logical_lines(text):
        chain: list[str] = []
        for m in _CMD.finditer(line):
            if m.group(1):
                action = (m.group(1) + (m.group(2) or "")).strip()
            elif m.group(3):
                action = m.group(3)
            elif m.group(4):
                action = "apply"
            elif m.group(5):
                action = "move-away"
            else:
                action = "reinstall"
            if not chain or chain[-1] != action:
                chain.append(action)
        if chain:
            chains.append(tuple(chain))
    return chains


@pytest.fixture(scope="module")
def mans(tmp_path_factory):
    return write_manifests(tmp_path_factory.mktemp("next-steps"))


@pytest.fixture
def long_venv(htpl, hroot):
    """The hostile template venv at a path as long as a user's."""
    return kit.clone(htpl, long_venv_path(hroot))


def act(action: str, venv: Path, cli_in, man: Path, aside: Path) -> tuple[int, str]:
    target = kit.target_of(venv)
    if action == "move-away":
        shutil.move(str(backup_path(target)), aside)
        return EXIT_OK, ""
    if action == "reinstall":  # what pip install --force-reinstall does: the RECORD's files back
        target.write_bytes(PRISTINE_A)
        return EXIT_OK, ""
    code, out, err = cli_in(*action.split(), venv, manifests=man)
    assert_pastes(out + err, venv)
    return code, out + err


@pytest.mark.parametrize(("state", "backup"), CASES, ids=CASE_IDS)
def test_every_suggested_step_holds(state, backup, long_venv, hroot, cli_in, mans):
    venv = long_venv
    pinned, only_b = mans
    man = only_b if state == "unpinned" else pinned
    build(state, backup, venv)
    bak = backup_path(kit.target_of(venv))
    template = hroot / "state"
    shutil.copytree(venv, template, symlinks=True)
    chains: set[tuple[str, ...]] = set()
    for command in COMMANDS:
        code, out, err = cli_in(*command, venv, manifests=man)
        assert code != 1, (command, out, err)
        assert_pastes(out + err, venv)
        if backup == "corrupt":
            assert bak.read_bytes() == CORRUPT, f"{command} touched a file it did not write"
        chains.update(suggestions(out + err))
        shutil.rmtree(venv)
        shutil.copytree(template, venv, symlinks=True)
    seen: set[tuple[str, ...]] = set()
    todo = sorted(chains)
    while todo:
        chain = todo.pop()
        if chain in seen or len(seen) > 40:
            continue
        seen.add(chain)
        shutil.rmtree(venv)
        shutil.copytree(template, venv, symlinks=True)
        aside = hroot / "moved-away"
        aside.unlink(missing_ok=True)
        moved = False
        for action in chain:
            code, said = act(action, venv, cli_in, man, aside)
            moved = moved or action == "move-away"
            assert code == EXIT_OK, f"suggested {chain}: {action} gave {code}: {said}"
            if backup == "corrupt":
                where = aside if moved else bak
                assert where.read_bytes() == CORRUPT, f"suggested {chain}: {action} lost the corrupt file"
            if action == "revert --clean" and backup == "stale":
                assert not bak.exists()
            for more in suggestions(said):  # where that leads
                if len(chain) + len(more) <= 6:
                    todo.append(chain + more)
        last = chain[-1]
        if last == "apply":
            assert cli_in("verify", venv, manifests=man)[0] == EXIT_OK, f"suggested {chain}: not patched"

"""Every next step a message suggests is true, and following it loses nothing.

For every target state x backup state, every command runs once; each line of what it says
that suggests a step (a `ple4patch ...` command, "move it away", "reinstall the engine",
"then apply") becomes a chain of actions, run on a fresh copy of that venv. Each suggested
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
from kit.fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest, fake_patch, fake_patch_old
from ple4patch.errors import EXIT_OK
from ple4patch.paths import backup_path

CORRUPT = b"my own notes, not a backup\n"
STATES = ("pristine", "patched", "patched_older", "unpinned", "modified")
BACKUPS = ("absent", "present", "stale", "corrupt")
COMMANDS = (("status",), ("apply",), ("apply", "--dry-run"), ("verify",), ("revert",), ("revert", "--clean"))

_CMD = re.compile(r"ple4patch (apply|revert|verify|status)((?: --[a-z-]+)*)(?!:)|`(revert --clean|apply --allow-unknown"
                  r"|apply --dry-run)`|(then apply)|([Mm]ove (?:it|\S+) away)|(reinstall the engine|Restore the "
                  r"engine with pip|pip install --force-reinstall)")


def suggestions(text: str) -> list[tuple[str, ...]]:
    """The action chains a text suggests: one per line, the actions in the order they appear."""
    chains = []
    for line in text.splitlines():
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
    d = tmp_path_factory.mktemp("next-steps")
    pinned = d / "pinned.json"
    pinned.write_text(fake_manifest(PRISTINE_A, PRISTINE_B, older=True).dumps())
    only_b = d / "only-b.json"
    only_b.write_text(fake_manifest(PRISTINE_B).dumps())
    return pinned, only_b


def build(state: str, backup: str, venv: Path) -> None:
    target = kit.target_of(venv)
    bak = backup_path(target)
    target.write_bytes({
        "pristine": PRISTINE_A, "unpinned": PRISTINE_A,
        "patched": fake_patch(PRISTINE_A.decode()).encode(),
        "patched_older": fake_patch_old(PRISTINE_A.decode()).encode(),
        "modified": PRISTINE_A + b"# tuned by hand\n",
    }[state])
    data = {"absent": None, "present": PRISTINE_A, "stale": PRISTINE_B, "corrupt": CORRUPT}[backup]
    if data is not None:
        bak.write_bytes(data)


def act(action: str, venv: Path, cli_in, man: Path, aside: Path) -> tuple[int, str]:
    target = kit.target_of(venv)
    if action == "move-away":
        shutil.move(str(backup_path(target)), aside)
        return EXIT_OK, ""
    if action == "reinstall":  # what pip install --force-reinstall does: the RECORD's files back
        target.write_bytes(PRISTINE_A)
        return EXIT_OK, ""
    code, out, err = cli_in(*action.split(), venv, manifests=[man])
    return code, out + err


CASES = [(s, b) for s in STATES for b in BACKUPS]


@pytest.mark.parametrize(("state", "backup"), CASES, ids=[f"{s}-{b}" for s, b in CASES])
def test_every_suggested_step_holds(state, backup, hvenv, hroot, cli_in, mans):
    pinned, only_b = mans
    man = only_b if state == "unpinned" else pinned
    build(state, backup, hvenv)
    bak = backup_path(kit.target_of(hvenv))
    template = hroot / "state"
    shutil.copytree(hvenv, template, symlinks=True)
    chains: set[tuple[str, ...]] = set()
    for command in COMMANDS:
        code, out, err = cli_in(*command, hvenv, manifests=[man])
        assert code != 1, (command, out, err)
        if backup == "corrupt":
            assert bak.read_bytes() == CORRUPT, f"{command} touched a file it did not write"
        chains.update(suggestions(out + err))
        shutil.rmtree(hvenv)
        shutil.copytree(template, hvenv, symlinks=True)
    seen: set[tuple[str, ...]] = set()
    todo = sorted(chains)
    while todo:
        chain = todo.pop()
        if chain in seen or len(seen) > 40:
            continue
        seen.add(chain)
        shutil.rmtree(hvenv)
        shutil.copytree(template, hvenv, symlinks=True)
        aside = hroot / "moved-away"
        aside.unlink(missing_ok=True)
        moved = False
        for action in chain:
            code, said = act(action, hvenv, cli_in, man, aside)
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
            assert cli_in("verify", hvenv, manifests=[man])[0] == EXIT_OK, f"suggested {chain}: not patched"

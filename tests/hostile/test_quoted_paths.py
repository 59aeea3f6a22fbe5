"""A venv path with a space, a quote or a non-ASCII character in it: every path is shown whole,
and every command ple4patch suggests pastes into a shell as printed.

The venv is a copy of the hostile template (1cat-vllm 1.5.0 holding PRISTINE_A, installed by
pip), at a path long enough that the suggestions wrap. For each state that suggests something
(pristine, unpinned, modified, patched), each command's text is read as a shell reads it
(` \\` continuations joined): every `ple4patch COMMAND` names the venv as one shell word, the pip
reinstall runs the venv's own interpreter, no line is wider than 100 columns, and no path under
site-packages is cut at its space. The `next:` line of `status` is then pasted into bash (with
`ple4patch` the CLI under test) and must do what it says.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

import kit
from kit.fakepatch import PRISTINE_A
from ple4patch import columns
from ple4patch.errors import EXIT_MODIFIED, EXIT_OK, EXIT_UNPINNED

NAMES = {
    "space": "engine venv with spaces in its name",
    "quote": "it's the engine's venv",
    "non-ascii": "moteur d'inférence ünïcode",
}
_SUGGESTED = re.compile(r"ple4patch (apply|status|verify|revert|inspect)\b(?!:)")


@pytest.fixture(params=list(NAMES), ids=list(NAMES))
def odd_venv(request, htpl, hroot) -> Path:
    return kit.clone(htpl, hroot / "models" / "qwen3.8-flash-next" / NAMES[request.param])


def _run(*args, env) -> subprocess.CompletedProcess:
    return kit.fake_cli(*args, env=env)


def _suggested_venvs(text: str) -> list[str]:
    """The venv argument of every `ple4patch COMMAND [--options] VENV` the text suggests, as a
    shell reads the line it is printed on."""
    out = []
    for line in kit.shell_lines(text):
        for m in _SUGGESTED.finditer(line):
            lex = shlex.shlex(line[m.end():], posix=True, punctuation_chars="`")
            lex.whitespace_split = True
            word = lex.get_token()
            while word is not None and word.startswith("-"):
                word = lex.get_token()
            if word is not None and word not in ("", "`") and not word.isupper():
                out.append(word)
    return out


def _one_word(line: str) -> bool:
    try:
        return len(shlex.split(line.removesuffix(columns.CONTINUATION).strip("` "))) == 1
    except ValueError:
        return False


def _check_text(text: str, venv: Path) -> None:
    for line in text.splitlines():  # wider only when it is one shell word standing alone
        assert len(line) <= columns.WIDTH or _one_word(line), f"wider than {columns.WIDTH} columns: {line!r}"
    joined = "\n".join(kit.logical_lines(text))
    # every path under site-packages starts with the whole venv path (not at its space)
    assert joined.count("/lib/python") == joined.count(f"{venv}/lib/python"), text
    for word in _suggested_venvs(text):
        assert word == str(venv), f"a suggested command names {word!r}, not {venv}: {text}"
    for line in kit.shell_lines(text):
        if " -m pip install" in line:
            start = line.index(" -m pip install")
            python = shlex.split(line[:start].rsplit("(", 1)[-1])[-1]
            assert python == f"{venv}/bin/python", f"not the venv's own pip, as printed: {text}"


def test_suggestions_paste_and_paths_stay_whole(odd_venv, hman):
    pinned = kit.env_with([hman])
    unpinned = kit.env_with([])

    proc = _run("status", odd_venv, env=pinned)
    assert proc.returncode == EXIT_OK, proc.stderr
    _check_text(proc.stdout, odd_venv)
    assert f"target:  {kit.target_of(odd_venv)}" in kit.logical_lines(proc.stdout)  # whole, not cut at the space
    assert _suggested_venvs(proc.stdout) == [str(odd_venv)]

    for args, env, code in [(("status",), unpinned, EXIT_OK), (("apply",), unpinned, EXIT_UNPINNED),
                            (("apply", "--dry-run", "--stat"), unpinned, EXIT_OK),
                            (("apply", "--dry-run"), pinned, EXIT_OK)]:
        proc = _run(*args, odd_venv, env=env)
        assert proc.returncode == code, (args, proc.stdout, proc.stderr)
        _check_text(proc.stdout + proc.stderr, odd_venv)
        assert _suggested_venvs(proc.stdout + proc.stderr), (args, proc.stdout, proc.stderr)

    target = kit.target_of(odd_venv)
    target.write_bytes(PRISTINE_A + b"# edited\n")
    proc = _run("apply", odd_venv, env=pinned)
    assert proc.returncode == EXIT_MODIFIED and " -m pip install" in proc.stderr, proc.stderr
    _check_text(proc.stderr, odd_venv)
    target.write_bytes(PRISTINE_A)

    # `next:` as printed, pasted into a shell: it patches this venv
    proc = _run("status", odd_venv, env=pinned)
    nxt = next(line for line in kit.shell_lines(proc.stdout) if line.startswith("next:"))
    cmd = " ".join(shlex.quote(str(c)) for c in kit.fake_cmd())
    pasted = subprocess.run(["bash", "-c", f'ple4patch() {{ {cmd} "$@"; }}\n{nxt.removeprefix("next:")}'],
                            capture_output=True, text=True, env=pinned, timeout=60)
    assert pasted.returncode == EXIT_OK, (nxt, pasted.stdout, pasted.stderr)
    proc = _run("status", odd_venv, env=pinned)
    assert "state:   patched" in proc.stdout, proc.stdout
    _check_text(proc.stdout, odd_venv)
    assert _suggested_venvs(proc.stdout) == [str(odd_venv)]  # `next: ple4patch verify VENV  (or revert)`


def test_a_newline_in_the_venv_path_is_suggested_as_one_escaped_word(htpl, hroot, hman):
    """A venv path with a newline: an error that suggests a command (errors are one line: their
    line breaks become spaces) writes it `$'...\\n...'`, never a raw newline, so pasted it runs on
    that venv, not on the sibling whose name has a space there."""
    odd = kit.clone(htpl, hroot / "nl" / "eng\nv")
    sibling = kit.clone(htpl, hroot / "nl" / "eng v")
    env = kit.env_with([hman])
    proc = _run("verify", odd, env=env)  # pristine: `run ple4patch apply VENV`
    assert proc.returncode != EXIT_OK and "$'" in proc.stderr, proc.stderr
    line = " ".join(kit.logical_lines(proc.stderr))
    suggested = line[line.index("`ple4patch apply ") + 1:].split("`", 1)[0]
    cmd = " ".join(shlex.quote(str(c)) for c in kit.fake_cmd())
    pasted = subprocess.run(["bash", "-c", f'ple4patch() {{ {cmd} "$@"; }}\n{suggested}'],
                            capture_output=True, text=True, env=env, timeout=60)
    assert pasted.returncode == EXIT_OK, (suggested, pasted.stdout, pasted.stderr)
    assert "state:   patched" in _run("status", odd, env=env).stdout
    assert "state:   pristine" in _run("status", sibling, env=env).stdout


def test_a_directory_name_ending_in_a_quote_keeps_paths_whole(htpl, hroot, hman):
    """`/.../o'/venv`: the site-packages found after the quote is the tail of a path, so every
    path is shown whole (never `/.../o'vllm/... (in /venv/lib/...)`)."""
    odd = kit.clone(htpl, hroot / "q" / "o'" / "venv")
    proc = _run("status", odd, env=kit.env_with([hman]))
    assert proc.returncode == EXIT_OK, proc.stderr
    assert str(kit.target_of(odd)) in proc.stdout.split(), proc.stdout
    assert "(in /venv/" not in proc.stdout


def test_the_move_away_step_for_a_foreign_backup_pastes(odd_venv, hman):
    """A file ple4patch did not make where the backup goes: the step names it and gives the `mv`
    to paste, quoted; pasted, it keeps the file (as `.mine`) and frees the backup's place."""
    from ple4patch.paths import backup_path

    bak = backup_path(kit.target_of(odd_venv))
    bak.write_bytes(b"mine\n")
    proc = _run("status", odd_venv, env=kit.env_with([hman]))
    line = " ".join(kit.shell_lines(proc.stdout))
    mv = line[line.index("`mv ") + 1:].split("`", 1)[0]
    done = subprocess.run(["bash", "-c", mv], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, (mv, done.stderr)
    assert not bak.exists() and Path(f"{bak}.mine").read_bytes() == b"mine\n"

"""The CLI in a subprocess, and readers of its output.

- `run_cli(*args, env=)` / `run_real(...)`: the real CLI (`python -m ple4patch`) with the
  real transform.
- `fake_cli(*args, env=)`: the real CLI (real locking, fault points, exit codes, JSON) with
  the tiny deterministic `fakepatch.fake_patch` as the transform
  (tests/reliability/fake_transform_cli.py), for tests that run ple4patch hundreds of times.
- `popen_for_ctrl_c(cmd, env=)`: a child to send SIGINT to, with SIGINT's default restored
  in it however the suite was launched.
- `json_of(proc)`, `error_message(proc, command)`, `one_message(text, prefix)`: what a run
  printed, checked (JSON against the shipped schema, `kit.schema`; a text error is one message,
  wrapped at 100 columns).
- `shell_lines(text)`, `logical_lines(text)`: text for people as a shell reads it (` \\`
  continuations joined) and as it was written before wrapping (continuation lines joined too);
  `names_of(path, venv)`: the ways text names a path (whole, or relative to site-packages),
  `mentions(text, path, venv)`: whether a text names it so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ple4patch.fsio import LOCK_TIMEOUT_ENV
from .schema import validate
from tools.engine_files import REPO
from tools.throwaway import PY, cli_env

FAKE_TRANSFORM_CLI = REPO / "tests" / "reliability" / "fake_transform_cli.py"


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m ple4patch ARGS` in a subprocess (not raising on a non-zero exit)."""
    return subprocess.run(
        [PY, "-m", "ple4patch", *map(str, args)],
        capture_output=True,
        text=True,
        env=env if env is not None else cli_env(),
        cwd=REPO,
        timeout=timeout,
    )


def run_real(*args, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli(*args, env=env, timeout=timeout)


def env_with(manifests: list[Path] = (), **extra: str) -> dict[str, str]:
    env = cli_env(list(manifests))
    env.pop(LOCK_TIMEOUT_ENV, None)
    env.update(extra)
    return env


def fake_cmd(*args) -> list[str]:
    return [sys.executable, str(FAKE_TRANSFORM_CLI), *map(str, args)]


def fake_cli(*args, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(fake_cmd(*args), capture_output=True, text=True, errors="surrogateescape", env=env,
                          timeout=timeout)


def _default_sigint() -> None:  # runs in the child between fork and exec
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen_for_ctrl_c(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start `cmd` (stdout/stderr piped, text) for a test that interrupts it with SIGINT.

    A child inherits an ignored SIGINT (the suite run under `nohup`, or as `make test &` from a
    script), and Python installs its KeyboardInterrupt handler only when SIGINT is not ignored
    at start: such a child would sleep through the test's Ctrl-C. The child gets SIGINT's
    default disposition back before exec, so its Python installs the handler as under a
    terminal. Where that cannot be done (no fork/exec), the test is skipped, saying why.
    """
    if os.name != "posix":
        pytest.skip("SIGINT's disposition can only be reset in the child on POSIX (fork/exec)")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_default_sigint)


def json_of(proc: subprocess.CompletedProcess) -> dict:
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"not JSON (rc {proc.returncode}): {proc.stdout!r} {proc.stderr!r}") from None
    assert data["exit_code"] == proc.returncode, (data, proc.returncode)
    return validate(data)


def shell_lines(text: str) -> list[str]:
    """The lines of `text` as a shell reads them: a line ending in ` \\` goes on on the next."""
    out: list[str] = []
    joining = False
    for line in text.splitlines():
        if joining:
            out[-1] = out[-1][:-2] + " " + line.strip()
        else:
            out.append(line)
        joining = out[-1].endswith(" \\")
    return out


def logical_lines(text: str) -> list[str]:
    """The lines of `text` as written before it was wrapped at 100 columns: shell continuations
    joined, and every indented line joined to the line before it (its continuation)."""
    out: list[str] = []
    for line in shell_lines(text):
        if out and line.startswith(" "):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def one_message(text: str, prefix: str = "") -> str:
    """`text` is one message starting with `prefix` (its first line, and any further line its
    indented continuation): that message as one line."""
    assert text.endswith("\n"), f"no newline at the end: {text!r}"
    lines = logical_lines(text)
    assert len(lines) == 1, f"not one message: {text!r}"
    assert lines[0].startswith(prefix), text
    return lines[0]


def error_message(proc: subprocess.CompletedProcess, command: str) -> str:
    """The text-mode error: one message on stderr (`ple4patch COMMAND: error: ...`, wrapped at
    100 columns), nothing on stdout; returned as one line."""
    assert proc.stdout == "", proc.stdout
    return one_message(proc.stderr, f"ple4patch {command}: error: ")


def names_of(path: Path, venv: Path) -> set[str]:
    """How text for people may name `path`: whole, or relative to the venv's site-packages."""
    from tools.throwaway import site_packages

    names = {str(path)}
    site = site_packages(Path(venv))
    if Path(path).is_relative_to(site) and Path(path) != site:
        names.add(Path(path).relative_to(site).as_posix())
    return names


def mentions(text: str, path: Path, venv: Path) -> bool:
    """Whether text for people names `path` (whole, or relative to site-packages), its wrapped
    lines joined."""
    joined = "\n".join(logical_lines(text))
    return any(n in joined for n in names_of(path, venv))

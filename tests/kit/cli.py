"""The CLI in a subprocess, and readers of its output.

- `run_cli(*args, env=)` / `run_real(...)`: the real CLI (`python -m ple4patch`) with the
  real transform.
- `fake_cli(*args, env=)`: the real CLI (real locking, fault points, exit codes, JSON) with
  the tiny deterministic `fakepatch.fake_patch` as the transform
  (tests/reliability/fake_transform_cli.py), for tests that run ple4patch hundreds of times.
- `popen_for_ctrl_c(cmd, env=)`: a child to send SIGINT to, with SIGINT's default restored
  in it however the suite was launched.
- `json_of(proc)`, `one_line_error(proc, command)`: what a run printed, checked (JSON against
  the shipped schema, `kit.schema`).
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


def one_line_error(proc: subprocess.CompletedProcess, command: str) -> str:
    """The text-mode error: exactly one line on stderr, nothing on stdout."""
    err = proc.stderr
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(f"ple4patch {command}: error: "), err
    assert proc.stdout == "", proc.stdout
    return err.strip()

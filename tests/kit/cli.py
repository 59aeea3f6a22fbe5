"""The CLI in a subprocess, and readers of its output.

- `run_cli(*args, env=)` / `run_real(...)`: the real CLI (`python -m ple4patch`) with the
  real transform.
- `fake_cli(*args, env=)`: the real CLI (real locking, fault points, exit codes, JSON) with
  the tiny deterministic `fakepatch.fake_patch` as the transform
  (tests/reliability/fake_transform_cli.py), for tests that run ple4patch hundreds of times.
- `json_of(proc)`, `one_line_error(proc, command)`: what a run printed, checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ple4patch.fsio import LOCK_TIMEOUT_ENV
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


def json_of(proc: subprocess.CompletedProcess) -> dict:
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"not JSON (rc {proc.returncode}): {proc.stdout!r} {proc.stderr!r}") from None
    assert data["exit_code"] == proc.returncode, (data, proc.returncode)
    return data


def one_line_error(proc: subprocess.CompletedProcess, command: str) -> str:
    """The text-mode error: exactly one line on stderr, nothing on stdout."""
    err = proc.stderr
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(f"ple4patch {command}: error: "), err
    assert proc.stdout == "", proc.stdout
    return err.strip()

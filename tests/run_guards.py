"""pytest checks for runs that must prove something (`make test-triton-latest` sets them):

- `$PLE4PATCH_EXPECT_TRITON=X.Y.Z`: stop before any test (exit 4, usage error) unless the
  Python running pytest imports exactly Triton X.Y.Z.
- `$PLE4PATCH_EXPECT_SIGINT_IGNORED=1`: stop before any test (exit 4) unless pytest itself
  was started with SIGINT ignored (as under `nohup` or `make test &` from a script), so a run
  that claims the Ctrl-C tests pass when launched that way really was launched that way.
- `$PLE4PATCH_TESTS_MUST_RUN=1`: fail the run (exit 1) when no test passed, e.g. when every
  test was skipped because torch or Triton is missing: a run that ran nothing proves nothing.

Loaded by tests/conftest.py (or `-p run_guards` with tests/ on the path).
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

EXPECT_TRITON_ENV = "PLE4PATCH_EXPECT_TRITON"
MUST_RUN_ENV = "PLE4PATCH_TESTS_MUST_RUN"
EXPECT_SIGINT_IGNORED_ENV = "PLE4PATCH_EXPECT_SIGINT_IGNORED"


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get(EXPECT_SIGINT_IGNORED_ENV) and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        pytest.exit(
            f"${EXPECT_SIGINT_IGNORED_ENV}=1, but pytest was started with SIGINT not ignored "
            f"({signal.getsignal(signal.SIGINT)!r}): start it under `trap '' INT`",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    want = os.environ.get(EXPECT_TRITON_ENV)
    if not want:
        return
    try:
        import triton

        have, where = getattr(triton, "__version__", "of unknown version"), os.path.dirname(triton.__file__)
    except Exception as exc:  # noqa: BLE001 - any import failure means "not the one we want"
        have, where = f"none ({type(exc).__name__}: {exc})", "-"
    if have != want:
        pytest.exit(
            f"${EXPECT_TRITON_ENV}={want}, but {sys.executable} imports triton {have} ({where}): "
            f"this run would not test the Triton it claims to",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get(MUST_RUN_ENV) or exitstatus != pytest.ExitCode.OK:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter is not None else {}
    passed = [r for r in stats.get("passed", []) if getattr(r, "when", "call") == "call"]
    if not passed:
        skipped = len(stats.get("skipped", []))
        msg = f"${MUST_RUN_ENV}: no test ran ({skipped} skipped, 0 passed): this run proves nothing"
        if reporter is not None:
            reporter.write_line(msg, red=True, bold=True)
        else:
            print(msg, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

"""The suite does not depend on how it is launched: a child the tests interrupt with Ctrl-C
gets SIGINT's default back even when the suite itself runs with SIGINT ignored (`nohup`,
`make test &` from a script). `make test-sigint-ignored` (run by .ci/run) runs the Ctrl-C
tests once launched that way."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

import kit

# What a child Python says SIGINT does: "handler" (KeyboardInterrupt, as under a terminal) or "ignored".
PROBE = (
    "import signal; h = signal.getsignal(signal.SIGINT); "
    "print('handler' if h is signal.default_int_handler else 'ignored' if h is signal.SIG_IGN else repr(h))"
)


@pytest.fixture
def sigint_ignored():
    """This process (and so, by default, every child it starts) ignores SIGINT."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_plain_child_inherits_an_ignored_sigint(sigint_ignored):
    """The failure the helper exists for: Python in such a child installs no handler."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ignored"


def test_popen_for_ctrl_c_restores_the_default_in_the_child(sigint_ignored):
    proc = kit.popen_for_ctrl_c([sys.executable, "-c", PROBE], env=kit.cli_env())
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out.strip()) == (0, "handler"), err


def test_a_ctrl_c_reaches_the_child_when_the_suite_ignores_sigint(sigint_ignored):
    """SIGINT sent to the child interrupts it within seconds: KeyboardInterrupt, then Python exits
    by the signal itself (-SIGINT)."""
    code = "import sys, time; print('ready', flush=True); time.sleep(30)"
    proc = kit.popen_for_ctrl_c([sys.executable, "-c", code], env=kit.cli_env())
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, (proc.returncode, err)


def _sigint_senders():
    """(file, test name, its source) of every test function in tests/ that sends SIGINT."""
    import ast

    for path in sorted(kit.REPO.joinpath("tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if "SIGINT" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                src = ast.get_source_segment(text, node) or ""
                if "send_signal(signal.SIGINT)" in src or re.search(r"kill\([^)]*SIGINT", src):
                    yield path.relative_to(kit.REPO), node.name, src


def test_every_ctrl_c_test_starts_its_child_with_the_helper_and_runs_in_the_sigint_ignored_run():
    """A test that interrupts a child must start it with kit.popen_for_ctrl_c (or it depends on
    how the suite was launched), and be named so that `make test-sigint-ignored` selects it."""
    found = list(_sigint_senders())
    assert found, "no Ctrl-C test found: this check checks nothing"
    for path, name, src in found:
        assert "popen_for_ctrl_c" in src and "subprocess.Popen" not in src, f"{path}::{name}"
        assert re.search(r"ctrl_c|sigint", name), f"{path}::{name}: not selected by -k 'ctrl_c or sigint'"

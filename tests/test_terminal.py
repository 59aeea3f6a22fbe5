"""`apply --dry-run` for people, under a real pseudo-terminal (pty): the summary first (regions,
+/- each, the verdict), then the diff, coloured unless NO_COLOR, paged through $PAGER when longer
than the screen (--no-pager: never); `--stat` the summary alone; piped, a plain unified diff.
Plus the text rules: lines fit 100 columns, hashes short unless --verbose."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

import kit
from kit import TEST_MANIFEST, cli_env, standin_bytes
from ple4patch import render, terminal

ESC = "\x1b["
PAGER_SCRIPT = (
    "import json, os, sys\n"
    "text = sys.stdin.read()\n"
    "open(sys.argv[1], 'w').write(json.dumps({'text': text, 'LESS': os.environ.get('LESS')}))\n"
    "print('PAGER GOT', text.count(chr(10)), 'LINES')\n"
)


def run_in_pty(args: list[str], env: dict, rows: int = 40, cols: int = 120) -> str:
    """`python -m ple4patch ARGS` with stdin/stdout/stderr on a pty of rows x cols; all it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "ple4patch", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=kit.REPO, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("tty")
    wheel = kit.build_wheel(base / "wheels", {kit.TARGET_REL: standin_bytes()}, version="1.5.1")
    venv = kit.make_venv(base / "venv")
    kit.install(venv, wheel)
    return venv


@pytest.fixture
def pager(tmp_path):
    script = tmp_path / "pager.py"
    script.write_text(PAGER_SCRIPT)
    record = tmp_path / "paged.json"
    env = {**cli_env([TEST_MANIFEST]), "PLE4PATCH_PAGER": f"{sys.executable} {script} {record}", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    env.pop("LESS", None)
    return env, record


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_dry_run_on_a_terminal_summary_first_coloured_and_paged(venv, pager):
    env, record = pager
    out = run_in_pty(["apply", "--dry-run", str(venv)], env, rows=40)
    assert out.startswith("PAGER GOT") and record.exists(), out
    paged = json.loads(record.read_text())
    text, plain = paged["text"], _plain(paged["text"])
    assert paged["LESS"] == "FRX", "less quits on one screen, keeps colour, leaves the text"
    first = plain.splitlines()
    assert first[0].startswith(f"{kit.TARGET_REL}: 4 region(s) change, +")
    assert "Qwen4ExpNGramEmbedding.load_weights" in first[3]
    assert first[5].startswith("dry run: nothing written"), "the verdict right after the summary"
    assert plain.index("--- a/") > plain.index("dry run: nothing written")
    assert f"{ESC}32m+" in text and f"{ESC}36m@@ " in text and f"{ESC}1m--- a/" in text
    assert any(line.startswith("dry run: nothing written") for line in plain.rstrip().splitlines()[-4:]), \
        "and again at the end"
    assert kit.target_of(venv).read_bytes() == standin_bytes()


def test_no_color_and_no_pager(venv, pager):
    env, record = pager
    out = run_in_pty(["apply", "--dry-run", str(venv)], {**env, "NO_COLOR": "1"}, rows=40)
    assert ESC not in json.loads(record.read_text())["text"] and out.startswith("PAGER GOT")
    record.unlink()
    out = run_in_pty(["apply", "--dry-run", "--no-pager", str(venv)], env, rows=40)
    assert not record.exists()
    assert _plain(out).startswith(f"{kit.TARGET_REL}: 4 region(s) change") and f"{ESC}31m-" in out


def test_short_output_and_empty_pager_are_not_paged(venv, pager):
    env, record = pager
    out = run_in_pty(["apply", "--dry-run", str(venv)], env, rows=5000)
    assert not record.exists() and "--- a/" in out
    out = run_in_pty(["apply", "--dry-run", str(venv)], {**env, "PLE4PATCH_PAGER": "", "PAGER": ""}, rows=40)
    assert not record.exists() and "--- a/" in out


def test_stat_prints_the_summary_alone(venv, pager):
    env, record = pager
    for out in (run_in_pty(["apply", "--dry-run", "--stat", str(venv)], env, rows=10),
                subprocess.run([sys.executable, "-m", "ple4patch", "apply", "--dry-run", "--stat", str(venv)],
                               capture_output=True, text=True, env=env, cwd=kit.REPO).stdout):
        lines = out.splitlines()
        assert lines[0].startswith(f"{kit.TARGET_REL}: 4 region(s) change"), out
        assert lines[5].startswith("dry run: nothing written") and "ple4patch apply" in "".join(lines[6:]), out
        assert "--- a/" not in out and ESC not in out
    assert not record.exists()


def test_piped_dry_run_stays_a_plain_unified_diff(venv, pager, tmp_path):
    env, record = pager
    proc = subprocess.run([sys.executable, "-m", "ple4patch", "apply", "--dry-run", str(venv)],
                          capture_output=True, text=True, env=env, cwd=kit.REPO)
    assert proc.returncode == 0 and not record.exists() and ESC not in proc.stdout
    assert proc.stdout.startswith(f"--- a/{kit.TARGET_REL}\n+++ b/{kit.TARGET_REL}\n@@ ")
    diff, sep, _verdict = proc.stdout.partition("dry run: nothing written")
    assert sep and diff.endswith("\n"), "the verdict follows the diff"
    diff = diff.rstrip("\n")
    # the diff applies with patch(1) to the pristine file and gives the patched output
    work = tmp_path / "apply"
    (work / Path(kit.TARGET_REL).parent).mkdir(parents=True)
    (work / kit.TARGET_REL).write_bytes(standin_bytes())
    patch = subprocess.run(["patch", "-p1", "-s"], input=diff + "\n", text=True, cwd=work, capture_output=True)
    assert patch.returncode == 0, patch.stderr
    d = json.loads(subprocess.run([sys.executable, "-m", "ple4patch", "apply", "--dry-run", str(venv), "--json"],
                                  capture_output=True, text=True, env=env, cwd=kit.REPO).stdout)
    assert kit.sha(work / kit.TARGET_REL) == d["output_sha256"]


def test_colour_is_only_for_terminals(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert terminal.colour_wanted(Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not terminal.colour_wanted(Tty())
    monkeypatch.delenv("NO_COLOR")
    assert not terminal.colour_wanted(open(os.devnull, "w"))


def test_regions_name_the_class_and_def_each_hunk_changes():
    old = b"import os\n\n\nclass A:\n    def f(self,\n          x):\n        return 1\n\n    def g(self):\n        return 2\n"
    new = old.replace(b"return 1", b"return 10").replace(b"import os\n", b"import os\n# added: a comment\nimport re\n")
    diff = render.unified_diff(old, new, "m.py", context=0)
    regions = render.diff_regions(diff)
    assert [(r["scope"], r["added"], r["removed"], r["comment"]) for r in regions] == [
        ("module level", 2, 0, "added: a comment"), ("A.f", 1, 1, None)]
    assert render.stat_text(regions).splitlines()[1:] == [
        "  line     1  # added: a comment  +2 -0", "  line     7  A.f                 +1 -1"]


def test_regions_of_a_diff_of_several_files_count_each_hunk_alone():
    """The next file's `--- a/...` header is not a removed line of the last hunk before it, and a
    removed source line that reads `-- x` or `--- y` counts as removed."""
    a_old, a_new = b"x = 1\n", b"x = 1\n# added\n"
    b_old, b_new = b"-- x\n--- y\nz = 2\n", b"z = 2\n"
    diff = render.unified_diff(a_old, a_new, "a.py") + render.unified_diff(b_old, b_new, "b.py")
    regions = render.diff_regions(diff)
    assert [(r["file"], r["added"], r["removed"]) for r in regions] == [("a.py", 1, 0), ("b.py", 0, 2)], diff
    for r in regions:
        assert r["old_lines"] - r["removed"] == r["new_lines"] - r["added"]  # the context, both sides


# -- text for people: 100 columns, short hashes ----------------------------------------


def test_text_fits_100_columns_with_short_hashes(venv, pager):
    """Every line of text a command prints (not the diff's own lines) fits 100 columns with a
    venv path of ordinary length; hashes show 12 hex digits, --verbose shows them whole."""
    env, _ = pager
    short = Path("/opt/engine")  # what a user's venv path looks like, in place of the test's
    seen = []
    for args in (["status"], ["apply", "--dry-run", "--stat"], ["apply"], ["apply"], ["status"], ["verify"],
                 ["revert"], ["revert"], ["verify"]):
        proc = subprocess.run([sys.executable, "-m", "ple4patch", *args, str(venv)], capture_output=True,
                              text=True, env=env, cwd=kit.REPO)
        text = (proc.stdout + proc.stderr).replace(str(venv), str(short))
        seen.append(text)
        for line in text.splitlines():
            assert len(line) <= 100, f"{args}: {len(line)} columns: {line}"
            assert not re.search(r"[0-9a-f]{13,}", line), f"{args}: a long hash: {line}"
    assert any(re.search(r"\b[0-9a-f]{12}\b", t) for t in seen)
    proc = subprocess.run([sys.executable, "-m", "ple4patch", "status", "--verbose", str(venv)],
                          capture_output=True, text=True, env=env, cwd=kit.REPO)
    assert re.search(r"\b[0-9a-f]{64}\b", proc.stdout), proc.stdout


def test_labels_lead_with_the_installed_engine_version():
    assert render.engine_label("1.5.1", "1Cat-vLLM main 036318a0") == "1cat-vllm 1.5.1, file pinned as 1Cat-vLLM main 036318a0"
    assert render.short_hashes("sha256 " + "ab" * 32 + ".") == "sha256 " + "ab" * 6 + "."

#!/usr/bin/env python3
"""`make demo`: build the stand-in engine as a real wheel, install it into a
throw-away venv, and run dry-run -> apply -> status -> verify -> revert on it
with the installed `ple4patch` command.

The stand-in (tests/fixtures/standin_engine) is pinned only in the TEST manifest,
which the demo passes through $PLE4PATCH_EXTRA_MANIFESTS, as the tests do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ple4patch.paths import TARGET_REL  # noqa: E402
from tools import throwaway  # noqa: E402
from tools.engine_files import STANDIN_DIR, TEST_MANIFEST, standin_file  # noqa: E402
from tools.try_engine import on_path_note, ple4patch_command  # noqa: E402


def show(cmd: list[str], env: dict, *, max_lines: int | None = None) -> int:
    print(f"\n$ {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    lines = out.splitlines()
    if max_lines is not None and len(lines) > max_lines:
        head = lines[: max_lines - 6]
        tail = lines[-5:]
        plus = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
        minus = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
        lines = head + [f"... ({len(lines) - len(head) - len(tail)} more lines; +{plus} -{minus} in all) ..."] + tail
    print("\n".join(lines))
    print(f"[exit {proc.returncode}]", flush=True)
    return proc.returncode


def main() -> int:
    standin = standin_file()
    if standin is None:
        print(f"no stand-in engine at {STANDIN_DIR}", file=sys.stderr)
        return 1
    exe = ple4patch_command()  # .venv/bin/ple4patch under make: the path that works from here
    work = Path(tempfile.mkdtemp(prefix="ple4patch-demo-"))
    try:
        wheel = throwaway.build_wheel(work / "wheels", {TARGET_REL: standin.read_bytes()},
                                      version="1.5.1")
        venv = throwaway.make_venv(work / "engine-venv")
        throwaway.install(venv, wheel)
        print(f"built {wheel.name}")
        print(f"installed it into {venv} (pip, --no-deps)")
        env = throwaway.cli_env([TEST_MANIFEST])
        steps = [
            (["apply", str(venv), "--dry-run", "--stat"], 0, None),  # the summary; without --stat, the diff
            (["apply", str(venv)], 0, None),
            (["apply", str(venv)], 0, None),
            (["status", str(venv)], 0, None),
            (["verify", str(venv)], 0, None),
            (["revert", str(venv)], 0, None),
            (["status", str(venv)], 0, None),
        ]
        for args, want, max_lines in steps:
            rc = show([*exe.split(), *args], env, max_lines=max_lines)
            if rc != want:
                print(f"demo: `ple4patch {' '.join(args)}` exited {rc}, expected {want}", file=sys.stderr)
                return 1
        print("\ndemo: ok")
        print(on_path_note(exe))
        print("The demo's engine venv is removed now: `make try` keeps one, and prints the commands to run "
              "on it.")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`make try`: a stand-in engine venv that stays, to run ple4patch on by hand.

`python tools/try_engine.py [DIR]` (default `.try`) builds the stand-in engine
(tests/fixtures/standin_engine) as a real wheel, installs it into a fresh venv at DIR/engine,
writes a small checkpoint at DIR/checkpoint (tests/ckpt_factory.py), and prints each step, then
the commands to paste from the repository root. What it made there before is replaced; a DIR it
did not make is refused and left as it is. The stand-in's file is
pinned only in the TEST manifest, so the first command points $PLE4PATCH_EXTRA_MANIFESTS at it:
without it, `apply` refuses the file (exit 4: no manifest pins it), as it would an unknown engine.
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

from ple4patch.columns import fit  # noqa: E402
from ple4patch.paths import TARGET_REL  # noqa: E402
from tools import throwaway  # noqa: E402
from tools.engine_files import STANDIN_DIR, TEST_MANIFEST, standin_file  # noqa: E402

MARKER = ".ple4patch-try"  # in a directory this tool made: the one thing it may replace
STEPS = 4


def step(n: int, text: str) -> None:
    print(f"\n==> try {n}/{STEPS}: {text}", flush=True)


def shown(path: Path) -> str:
    """`path` as the commands name it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(path)


def ple4patch_command() -> str:
    """The ple4patch command of the Python running this (`.venv/bin/ple4patch` under make)."""
    exe = shutil.which("ple4patch", path=str(Path(sys.executable).parent))
    return shown(Path(exe)) if exe else f"{shown(Path(sys.executable))} -m ple4patch"


def commands(venv: str, ckpt: str | None, exe: str, manifest: str) -> list[str]:
    """The commands to paste, in the order of use."""
    out = [
        f'export PLE4PATCH_EXTRA_MANIFESTS="{manifest}"',
        f"{exe} status {venv}",
        f"{exe} apply --dry-run --stat {venv}",
        f"{exe} apply {venv}",
        f"{exe} verify {venv}",
        f"{exe} status {venv}",
    ]
    if ckpt is not None:
        out.append(f"{exe} inspect {ckpt} {venv} --tp 4")
    return out + [f"{exe} revert {venv}"]


def make_checkpoint(ckpt: Path) -> bool:
    """A small checkpoint shaped like the real model (tests/ckpt_factory.py, run as the README
    runs it); False, having said why, when this Python cannot write one (no torch)."""
    factory = REPO / "tests/ckpt_factory.py"  # run as a command, as the README does: never imported
    proc = subprocess.run([sys.executable, str(factory), str(ckpt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"no checkpoint: tests/ckpt_factory.py needs torch and safetensors ({proc.stderr.strip()[-200:]})")
        return False
    print(f"wrote {shown(ckpt)} (NVFP4 row-packed, the real model's names and config, tiny)")
    return True


def main(argv: list[str]) -> int:
    top = Path(argv[0] if argv else ".try")
    venv, ckpt = top / "engine", top / "checkpoint"
    standin = standin_file()
    if standin is None:
        print(f"try: no stand-in engine at {STANDIN_DIR}", file=sys.stderr)
        return 1
    if os.path.lexists(top) and (not top.is_dir() or any(top.iterdir())) and not (top / MARKER).is_file():
        what = "a directory that `make try` did not make" if top.is_dir() else "not a directory"
        print(fit(f"try: {top} already exists and is {what}; nothing written: move it "
                  f"away or give another one (make try TRY_DIR=...)"), file=sys.stderr)
        return 2
    step(1, "the stand-in engine as a real wheel (pip wheel; 1cat-vllm 1.5.1)")
    with tempfile.TemporaryDirectory(prefix="ple4patch-try-") as work:
        wheel = throwaway.build_wheel(Path(work) / "wheels", {TARGET_REL: standin.read_bytes()}, version="1.5.1")
        print(f"built {wheel.name}: a small ple_layer.py shaped like 1Cat-vLLM's")
        step(2, f"a fresh venv at {shown(venv)}, the wheel installed into it by pip (kept)")
        for made in (venv, ckpt):
            if os.path.lexists(made):
                shutil.rmtree(made)
        top.mkdir(parents=True, exist_ok=True)
        (top / MARKER).write_text("made by tools/try_engine.py (make try), which replaces what is here\n")
        throwaway.make_venv(venv.resolve())
        throwaway.install(venv.resolve(), wheel)
    print(f"installed into {shown(venv)}")
    step(3, f"a checkpoint at {shown(ckpt)} (tests/ckpt_factory.py)")
    have_ckpt = make_checkpoint(ckpt.resolve())
    step(4, "the commands to paste")
    here = Path.cwd().resolve() == REPO
    manifest = "$PWD/" + str(TEST_MANIFEST.relative_to(REPO)) if here else str(TEST_MANIFEST)
    print(f"These stay in {shown(top)}: `make try` makes them afresh, `rm -rf {shown(top)}` removes them.")
    print("The stand-in's file is pinned only in the test manifest: point PLE4PATCH_EXTRA_MANIFESTS at")
    print("that first (without it, `apply` refuses the file: exit 4, no manifest pins it).")
    print("From this directory:" if here else f"From {REPO}:")
    print()
    exe = ple4patch_command()
    for line in commands(shown(venv), shown(ckpt) if have_ckpt else None, exe, manifest):
        print(f"  {line}")
    print()
    print(on_path_note(exe))
    return 0


def on_path_note(exe: str) -> str:
    """What `ple4patch` in ple4patch's own `next:` lines is, when that name is not on PATH."""
    on_path = shutil.which("ple4patch")
    if on_path and " -m " not in exe and Path(on_path).resolve() == Path(exe).resolve():
        return "ple4patch is on your PATH: the commands it suggests (`next:` lines) paste as printed."
    if " -m " in exe:
        return fit(f"ple4patch names itself `ple4patch` in what it suggests (`next:`); here run it as {exe}.")
    return fit(f"ple4patch names itself `ple4patch` in what it suggests (`next:`); that is {exe} here, not "
               f"on your PATH (`. {Path(exe).parent}/activate` puts it there).")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

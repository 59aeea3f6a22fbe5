#!/usr/bin/env python3
"""Tool latency: whole-process wall time of the `ple4patch` command (no GPU needed).

On a real engine file (the largest `ple_layer.py` in ../shared/engines), built into a real
`1cat-vllm` wheel (benchmarks/harness.py: setuptools + pip wheel) and installed with pip into a
throw-away venv that has its own pip:

- status   `ple4patch status VENV` (the installed console script)
- pip-show `VENV/bin/python -m pip show 1cat-vllm` (what a user types to ask pip the same
           question: is it installed, which version); status and pip-show runs alternate
- apply    `ple4patch apply VENV` on the pristine file, timed alone; an untimed `revert`
           puts the pristine file back before each run

Each is a fresh process, timed with time.perf_counter around subprocess.run; warm-up runs
first (page cache, bytecode), then --runs timed runs. Every run's exit code and output are
checked (status says `pristine`, pip names the version, apply leaves the file `patched`).
Targets: status median <= 0.5x pip-show median; apply median <= 2 s.

Prints a table and writes tool.json (every run's time) and tool.txt into --out. Without
../shared/engines it says so and exits 0 (nothing to measure).

Usage: python benchmarks/bench_tool.py [--out DIR] [--runs 25] [--warmup 3] [--check]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import harness as hb

STATUS_RATIO_TARGET = 0.5  # status median / pip-show median
APPLY_TARGET_S = 2.0


def cli_env() -> dict[str, str]:
    """The caller's environment without a venv or test knobs: the shipped manifest pins it."""
    drop = ("VIRTUAL_ENV", "PLE4PATCH_FAULT", "PLE4PATCH_EXTRA_MANIFESTS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def expect(proc: subprocess.CompletedProcess, what: str, rc: int = 0, contains: str | None = None) -> None:
    if proc.returncode != rc or (contains is not None and contains not in proc.stdout):
        raise SystemExit(
            f"bench_tool: {what} exited {proc.returncode} (want {rc}"
            + (f", output containing {contains!r}" if contains else "")
            + f")\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )


def fmt_row(name: str, st: dict) -> str:
    ms = lambda v: f"{1000 * v:8.1f}"  # noqa: E731
    return (f"| {name:<34} | {st['runs']:4d} | {ms(st['median_s'])} | {ms(st['min_s'])} | "
            f"{ms(st['p25_s'])} | {ms(st['p75_s'])} | {ms(st['max_s'])} |")


def main() -> int:
    ap = hb.arg_parser(__doc__, "bench-out/tool")
    ap.add_argument("--runs", type=int, default=25, help="timed runs of each command (>= 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs of each command first")
    ap.add_argument("--ple4patch", default=None,
                    help="the ple4patch console script (default: the one beside this Python)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--engines", type=Path, default=hb.SHARED_ENGINES,
                    help="folder with INDEX.md and the real engine files (default ../shared/engines)")
    args = ap.parse_args()
    if args.runs < 20:
        ap.error("--runs must be at least 20")

    args.out.mkdir(parents=True, exist_ok=True)
    engine = hb.largest_engine_file(args.engines)
    if engine is None:
        msg = f"skipped: no real engine files ({args.engines}/*/ple_layer.py); nothing measured"
        print(f"bench_tool: {msg}")
        (args.out / "tool.json").write_text(json.dumps({"skipped": msg}, indent=2) + "\n")
        return 0
    data = engine.read_bytes()
    folder, size, sha256 = engine.parent.name, len(data), hashlib.sha256(data).hexdigest()
    exe = args.ple4patch or shutil.which("ple4patch", path=str(Path(sys.executable).parent))
    if not exe:
        raise SystemExit(f"bench_tool: no ple4patch console script beside {sys.executable}; "
                         "install ple4patch into this venv (make venv) or pass --ple4patch")

    work = Path(tempfile.mkdtemp(prefix="ple4patch-bench-tool-"))
    try:
        wheel = hb.engine_wheel(work, data, version="1.5.1")
        venv = work / "engine-venv"
        # A venv with its own pip (ensurepip, offline), as an engine venv has.
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        py = str(venv / "bin" / "python")
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       check=True, capture_output=True)
        env = cli_env()
        status_cmd = [exe, "status", str(venv)]
        pip_cmd = [py, "-m", "pip", "show", "1cat-vllm"]
        apply_cmd = [exe, "apply", str(venv)]
        revert_cmd = [exe, "revert", str(venv)]

        print(f"engine file  {folder}/ple_layer.py ({size:,} B, sha256 {sha256[:12]}...)")
        print(f"wheel        {wheel.name} installed with pip into {venv}")
        print(f"commands     {' '.join(status_cmd)}\n             {' '.join(pip_cmd)}\n"
              f"             {' '.join(apply_cmd)}   (then an untimed revert)")
        print(f"runs         {args.warmup} warm-up + {args.runs} timed each", flush=True)

        t_status: list[float] = []
        t_pip: list[float] = []
        for i in range(args.warmup + args.runs):
            # alternate the two so drift on the machine hits both alike
            ts, ps = hb.run_timed(status_cmd, env)
            expect(ps, "ple4patch status", 0, "state:   pristine")
            tp, pp = hb.run_timed(pip_cmd, env)
            expect(pp, "python -m pip show 1cat-vllm", 0, "Version: 1.5.1")
            if i >= args.warmup:
                t_status.append(ts)
                t_pip.append(tp)

        t_apply: list[float] = []
        for i in range(args.warmup + args.runs):
            ta, pa = hb.run_timed(apply_cmd, env)
            expect(pa, "ple4patch apply", 0)
            _, st = hb.run_timed(status_cmd, env)
            expect(st, "ple4patch status after apply", 0, "state:   patched")
            _, pr = hb.run_timed(revert_cmd, env)
            expect(pr, "ple4patch revert", 0)
            if i >= args.warmup:
                t_apply.append(ta)
        _, st = hb.run_timed(status_cmd, env)
        expect(st, "ple4patch status after the last revert", 0, "state:   pristine")

        s_status, s_pip, s_apply = hb.stats(t_status), hb.stats(t_pip), hb.stats(t_apply)
        ratio = s_status["median_s"] / s_pip["median_s"]
        targets = {
            "status_vs_pip_show": {"target": f"<= {STATUS_RATIO_TARGET}x", "value": ratio,
                                   "met": ratio <= STATUS_RATIO_TARGET},
            "apply_median_s": {"target": f"<= {APPLY_TARGET_S} s", "value": s_apply["median_s"],
                               "met": s_apply["median_s"] <= APPLY_TARGET_S},
        }
        lines = [
            "| command | runs | median ms | min ms | p25 ms | p75 ms | max ms |",
            "|---|---:|---:|---:|---:|---:|---:|",
            fmt_row("`ple4patch status VENV`", s_status),
            fmt_row("`python -m pip show 1cat-vllm`", s_pip),
            fmt_row("`ple4patch apply VENV`", s_apply),
            "",
            f"status / pip show (medians): {ratio:.3f}x (target <= {STATUS_RATIO_TARGET}x): "
            + ("met" if targets["status_vs_pip_show"]["met"] else "MISSED"),
            f"apply median: {s_apply['median_s']:.3f} s (target <= {APPLY_TARGET_S} s): "
            + ("met" if targets["apply_median_s"]["met"] else "MISSED"),
        ]
        text = "\n".join(lines)
        print("\n" + text)
        result = {
            "machine": hb.machine(),
            "engine_file": {"folder": folder, "bytes": size, "sha256": sha256},
            "wheel": wheel.name,
            "versions": {
                "ple4patch": hb.version_of(sys.executable, "ple4patch"),
                "libcst": hb.version_of(sys.executable, "libcst"),
                "click": hb.version_of(sys.executable, "click"),
                "engine_venv_pip": hb.version_of(py, "pip"),
            },
            "commands": {
                "status": status_cmd, "pip_show": pip_cmd, "apply": apply_cmd,
                "between_apply_runs": revert_cmd,
            },
            "warmup": args.warmup,
            "status": s_status,
            "pip_show": s_pip,
            "apply": s_apply,
            "targets": targets,
        }
        (args.out / "tool.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "tool.txt").write_text(text + "\n")
        print(f"\nwrote {args.out / 'tool.json'} and {args.out / 'tool.txt'}")
        if args.check and not all(t["met"] for t in targets.values()):
            return 1
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

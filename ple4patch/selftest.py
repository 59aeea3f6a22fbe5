"""Run the NVFP4 kernel self-check in a child Python and describe its report.

The check runs in a child process: the given venv's own Python (so the engine's torch and
Triton are the ones tested), or, without a venv, the Python running ple4patch. The child gets
the directory that holds this ``ple4patch`` package first on its sys.path and runs
``ple4patch.kernels.selfcheck``, which needs only torch and triton (no click, no libcst).

Without a GPU it compiles the kernel ahead of time for the arch (default sm_70, the V100) and
checks the PTX target, and runs the kernel under the Triton interpreter against the CPU
reference; with a GPU it also checks the compiled kernel bit for bit over the full code space,
on a CUDA table and on a pinned host table read through UVA.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from . import shell
from .errors import SelftestFailed, UsageError, VenvNotFound
from .paths import venv_root_of

TIMEOUT_S = 900
_PKG_PARENT = str(Path(__file__).resolve().parent.parent)
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from ple4patch.kernels.selfcheck import main; sys.exit(main(sys.argv[2:]))"
)
# What to do when the child Python lacks torch or Triton. The check belongs in the engine's
# venv (1Cat-vLLM depends on torch and Triton: the ones `vllm serve` will use); ple4patch's own
# venv needs neither, and installing them there would pull CUDA torch and its nvidia-* wheels.
_HINT_NO_VENV = (
    "run `ple4patch selftest VENV` with the engine's venv (the one `vllm serve` runs from: it has "
    "the engine's torch and Triton); ple4patch's own environment needs no torch, do not install it there"
)
_HINT_VENV = (
    "give the engine's venv (the one `vllm serve` runs from: 1Cat-vLLM installs torch and Triton "
    "into it); if it is that venv, its engine install is incomplete: reinstall 1cat-vllm there"
)


def venv_python(venv: str | os.PathLike) -> str:
    """The Python interpreter of a virtual environment. A path inside one (`VENV/bin/python`) is
    refused with the venv's root named, as every command refuses it."""
    p = Path(venv).expanduser()
    if not p.is_dir():
        root = venv_root_of(p)
        if root is not None:
            raise VenvNotFound(f"{str(p)!r} is not a venv but a file in one: did you mean {root}? "
                               f"(pass the venv's root: `{shell.ple4patch('selftest', root)}`)")
        what = "is not a directory" if p.exists() else "does not exist"
        raise VenvNotFound(f"venv {str(p)!r} {what}: give the engine's virtual environment directory")
    for name in ("bin/python", "bin/python3", "Scripts/python.exe"):
        cand = p / name
        if cand.exists() and os.access(cand, os.X_OK):
            return str(cand)
    root = venv_root_of(p)
    meant = f": did you mean {root}? (pass the venv's root: `{shell.ple4patch('selftest', root)}`)" if root else ""
    raise VenvNotFound(f"{str(p)!r} has no bin/python: give a virtual environment directory (one made by "
                       f"python -m venv){meant}")


# The GPU architectures --arch accepts: those ptxas knows. Triton 3.6.0 bundles the ptxas of CUDA
# 12.8 (its `ptxas --help`: sm_50 .. sm_120); newer CUDA adds sm_103, sm_110 and sm_121. Anything
# else is refused before anything compiles (ptxas would fail on it: `Value 'sm_7' is not defined`).
PTXAS_ARCHS = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121)
# sm_70, sm70, 70, 7.0 (and 10.0, 12.1: torch.cuda.get_device_capability's form); sm_90a (90 and up)
_ARCH = re.compile(r"(?:sm_?)?(?:([1-9]\d?)\.(\d)|([1-9]\d{0,2}))(a?)")


def check_arch(arch: str) -> str:
    """`--arch` as the self-check takes it (`sm_70`), or a UsageError naming the value and the
    accepted form. `sm_90a` is `sm_90`: Triton builds 90 and up as the arch-specific variant."""
    m = _ARCH.fullmatch(str(arch).strip().lower())
    known = f"ptxas knows sm_{' '.join(map(str, PTXAS_ARCHS))} (write it like sm_70)"
    shown = repr(arch if len(arch) <= 40 else arch[:40] + "...")
    if not m:
        raise UsageError(f"--arch: expected a CUDA architecture like sm_70, got {shown}; {known}")
    cc = int(m.group(3) or m.group(1) + m.group(2))
    if cc not in PTXAS_ARCHS or (m.group(4) and cc < 90):
        raise UsageError(f"--arch: unknown architecture {shown}; {known}")
    return f"sm_{cc}"


def run_selftest(venv: str | None, arch: str = "sm_70") -> dict:
    """Run the kernel self-check; return its report, or raise SelftestFailed.

    The report has: python, torch, triton, arch, compile (one entry per output dtype with the
    PTX target), mode ("gpu" or "interpreter"), gpu (device and capability, or None),
    exactness (per table kind and dtype: values compared, mismatches), ok, seconds.
    """
    arch = check_arch(arch)
    python = venv_python(venv) if venv else sys.executable
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # the child decides; compiled code must be real
    env.pop("PYTHONPATH", None)
    try:
        proc = subprocess.run(
            [python, "-c", _CHILD, _PKG_PARENT, arch],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise SelftestFailed(f"the kernel self-check in {python} did not finish within {TIMEOUT_S} s") from None
    except OSError as exc:
        raise SelftestFailed(f"could not run {python}: {exc}") from None
    report = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except ValueError:
                pass
            break
    if report is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SelftestFailed(f"the kernel self-check in {python} exited {proc.returncode} without a report: {tail}")
    report.setdefault("python", python)
    if report.get("missing"):
        hint = _HINT_VENV if venv else _HINT_NO_VENV
        raise SelftestFailed(f"{report['missing']} is not importable by {python} ({report.get('error')}): {hint}")
    if report.get("usage"):
        raise UsageError(f"--arch: {report.get('error')}")
    if not report.get("ok"):
        raise SelftestFailed(describe_failure(report))
    return report


def describe_failure(report: dict) -> str:
    parts = []
    for c in report.get("compile", []):
        if not c.get("ok"):
            parts.append(
                f"{c['dtype']} did not compile for {report.get('arch')}: {c.get('error') or 'PTX target ' + str(c.get('target'))}"
            )
    for e in report.get("exactness", []):
        if e["mismatches"]:
            parts.append(
                f"{e['mismatches']} of {e['values']} {e['dtype']} values differ from the reference "
                f"({e['table']} table; first {e['first_mismatch']})"
            )
    where = f"(triton {report.get('triton')}, torch {report.get('torch')}, {report.get('python')})"
    return "kernel self-check failed " + where + ": " + ("; ".join(parts) or report.get("error", "unknown reason"))


def format_report(report: dict) -> tuple[str, str]:
    """The report as text for people: (body, verdict); the verdict is the last line."""
    lines = [f"python {report['python']}: torch {report.get('torch')}, triton {report.get('triton')}"]
    for c in report.get("compile", []):
        lines.append(f"compile {c['dtype']:<8} for {report['arch']}: target {c.get('target')} ({', '.join(c.get('asm', []))})")
    gpu = report.get("gpu")
    if gpu:
        lines.append(f"GPU {gpu['device']} ({gpu['capability']}): compiled kernel checked on it")
    else:
        lines.append("no GPU: kernel checked under the Triton interpreter")
    for e in report.get("exactness", []):
        lines.append(
            f"bit-exact {e['dtype']:<8} {e['table']:<11} table: {e['values']} values, {e['mismatches']} mismatches"
        )
    return "\n".join(lines) + "\n", f"selftest passed in {report.get('seconds')} s"


def format_text(report: dict) -> str:
    body, verdict = format_report(report)
    return body + verdict

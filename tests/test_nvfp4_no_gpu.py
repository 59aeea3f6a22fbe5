"""`ple4patch.kernels.nvfp4.gather` where the compiled kernel cannot run: no CUDA device, and no
TRITON_INTERPRET=1 when triton was imported. The README's Kernel API example, run as a user runs
it (a fresh Python, this machine's environment): without the variable it stops with an error that
says no CUDA device was found and that TRITON_INTERPRET=1 set before importing triton runs it on
the CPU (never Triton's own "0 active drivers"); with it, the example passes.

Not `kernel_env`: that module sets TRITON_INTERPRET=1 for the kernel tests, and these tests are
about a Python without it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import kit

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if torch.cuda.is_available():  # pragma: no cover - the GPU machine
    pytest.skip("a CUDA device is present: the compiled kernel runs on it", allow_module_level=True)


def readme_example() -> str:
    """The Python block of the README's Kernel API section."""
    section = (kit.REPO / "README.md").read_text(encoding="utf-8").split("## Kernel API", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return block


def run_python(code: str, **env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=kit.REPO,
                          timeout=300)


def test_the_readme_example_without_a_gpu_says_what_to_do():
    proc = run_python(readme_example())
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: gather: no CUDA device was found"), proc.stderr
    assert "TRITON_INTERPRET=1 before triton is imported" in last and "0 active drivers" not in proc.stderr


def test_the_readme_example_runs_under_the_interpreter():
    proc = run_python(readme_example(), TRITON_INTERPRET="1")
    assert proc.returncode == 0, proc.stderr


def test_the_variable_set_too_late_is_named():
    code = ("import os, torch\nfrom ple4patch.kernels import nvfp4, nvfp4_gather\n"
            "os.environ['TRITON_INTERPRET'] = '1'\n"
            "nvfp4.gather(torch.zeros(4, 90, dtype=torch.uint8), torch.tensor([1]), torch.tensor([1.0]), 160)\n")
    proc = run_python(code)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: gather: no CUDA device was found"), proc.stderr
    assert "TRITON_INTERPRET is set, but only after triton compiled the kernel" in last, last


def test_bad_arguments_are_still_named_first():
    """The argument checks come before the device check: a wrong table is a TypeError that names
    it, on this machine too."""
    code = ("import torch\nfrom ple4patch.kernels import nvfp4\n"
            "nvfp4.gather(torch.zeros(4, 90, dtype=torch.int8), torch.tensor([1]), torch.tensor([1.0]), 160)\n")
    last = run_python(code).stderr.strip().splitlines()[-1]
    assert last.startswith("TypeError: table: expected dtype torch.uint8"), last

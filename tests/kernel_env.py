"""Import this before the kernels: torch and Triton or a skip, and the Triton interpreter when
there is no CUDA (TRITON_INTERPRET=1 must be set before the kernel module is decorated; a kernel
module imported earlier without it is decorated again under it)."""

import importlib
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

_mod = sys.modules.get("ple4patch.kernels.nvfp4_gather")
if _mod is not None and not HAS_CUDA and type(_mod._ple4_nvfp4_gather_kernel).__name__ != "InterpretedFunction":
    importlib.reload(_mod)

DEV = "cuda" if HAS_CUDA else "cpu"

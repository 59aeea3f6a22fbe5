"""The kernel self-check that ``ple4patch selftest`` runs, possibly in another venv's Python.

Run as ``python -m ple4patch.kernels.selfcheck ARCH`` (with the directory holding the ple4patch
package on sys.path): prints one JSON object on its last line of output. It imports only torch,
triton and ple4patch.kernels (nothing else from ple4patch), so it runs in an engine venv that
has no click or libcst.

Checks: (1) the gather compiles ahead of time for ARCH (e.g. sm_70) and its PTX targets it;
(2) without a GPU, the kernel under the Triton interpreter equals the CPU reference bit for bit
over the full code space; (3) with a GPU, the compiled kernel does so on the GPU, reading a CUDA
table and a pinned host table (UVA).
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time

GLOBALS = [1.0, 1.0 + 2.0**-11, 2.0**-20, 1.7316e-4, -0.375, 2.0**-127]


def _missing(name: str, exc: BaseException) -> dict:
    return {"ok": False, "missing": name, "error": f"{type(exc).__name__}: {exc}", "python": sys.executable}


def _exactness(nvfp4, gather_fn, torch, table_kinds, dtypes, globals_, dev) -> list:
    table = nvfp4.full_code_space_table(160)
    ids = torch.cat([torch.randperm(table.shape[0], generator=torch.Generator().manual_seed(0)), torch.arange(7)])
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
    checks = []
    for kind in table_kinds:
        t = {"cuda": lambda: table.to("cuda"), "pinned-host": lambda: table.pin_memory(), "cpu": lambda: table}[kind]()
        for dt in dtypes:
            values = mismatches = 0
            first = None
            for g in globals_:
                gt = torch.tensor([g], dtype=torch.float32, device=dev)
                out = gather_fn(t, ids.to(dev), gt, 160, dt).cpu().view(bits[dt])
                ref = nvfp4.dequant_reference(table[ids], g, 160, dt).view(bits[dt])
                bad = (out != ref).nonzero()
                values += ref.numel()
                mismatches += bad.shape[0]
                if bad.shape[0] and first is None:
                    r, c = bad[0].tolist()
                    first = {"global": g, "row": r, "col": c, "got": int(out[r, c]), "want": int(ref[r, c])}
            checks.append(
                {
                    "table": kind,
                    "dtype": str(dt).replace("torch.", ""),
                    "globals": len(globals_),
                    "values": values,
                    "mismatches": mismatches,
                    "first_mismatch": first,
                }
            )
    return checks


def run(arch: str = "sm_70") -> dict:
    t0 = time.perf_counter()
    report = {"python": sys.executable, "python_version": platform.python_version(), "arch": arch}
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        return {**report, **_missing("torch", exc)}
    try:
        import triton
    except Exception as exc:
        return {**report, **_missing("triton", exc)}
    report.update(torch=torch.__version__, triton=triton.__version__)

    from . import aot, nvfp4

    compiles = []
    for dt in ("float16", "float32", "bfloat16"):
        try:
            res = aot.compile_gather(arch, dt)
        except ValueError:
            raise
        except Exception as exc:
            unknown = re.search(r"ptxas\S* fatal\s*: (Value '[^']*' is not defined for option 'gpu-name')", str(exc))
            if unknown:  # this Triton's ptxas does not know the arch: a bad --arch, said once
                return {**report, "ok": False, "usage": True,
                        "error": f"unknown architecture {arch} for the ptxas of triton {triton.__version__} "
                                 f"({unknown.group(1)}); write it like sm_70"}
            compiles.append({"dtype": dt, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
            continue
        want = {f"sm_{res['arch']}"} | ({f"sm_{res['arch']}a"} if res["arch"] >= 90 else set())  # 90+: the arch-specific variant
        compiles.append({"dtype": dt, "ok": res["target"] in want, "target": res["target"], "asm": res["asm"]})
    report["compile"] = compiles
    compile_ok = all(c["ok"] for c in compiles)

    if torch.cuda.is_available():
        from .nvfp4_gather import ple4_nvfp4_gather  # compiled (selftest runs without TRITON_INTERPRET)

        dev = torch.cuda.current_device()
        report["gpu"] = {
            "device": torch.cuda.get_device_name(dev),
            "capability": "sm_%d%d" % torch.cuda.get_device_capability(dev),
        }
        checks = _exactness(
            nvfp4, ple4_nvfp4_gather, torch, ["cuda", "pinned-host"],
            [torch.float16, torch.float32, torch.bfloat16], GLOBALS, "cuda",
        )
        torch.cuda.synchronize()
        report["mode"] = "gpu"
    else:
        os.environ["TRITON_INTERPRET"] = "1"
        import importlib

        from . import nvfp4_gather

        interp = importlib.reload(nvfp4_gather)
        report["gpu"] = None
        checks = _exactness(nvfp4, interp.ple4_nvfp4_gather, torch, ["cpu"], [torch.float16, torch.float32], GLOBALS[:2], "cpu")
        report["mode"] = "interpreter"
    report["exactness"] = checks
    exact_ok = all(c["mismatches"] == 0 for c in checks)
    report["ok"] = compile_ok and exact_ok
    report["seconds"] = round(time.perf_counter() - t0, 2)
    return report


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    arch = argv[0] if argv else "sm_70"
    try:
        report = run(arch)
    except ValueError as exc:
        report = {"ok": False, "error": str(exc), "usage": True}
    sys.stdout.write("\n" + json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0 if report.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())

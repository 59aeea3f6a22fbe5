"""Ahead-of-time compilation of the NVFP4 gather kernel for a chosen GPU architecture.

No GPU is needed: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 70, 32))`` builds
sm_70 code with the ptxas that Triton's wheel bundles. Works with Triton 3.2 .. 3.9, whose
``ASTSource`` takes the constexpr arguments in different shapes.
"""

from __future__ import annotations

import re

# Argument types of the runtime (non-constexpr) arguments of _ple4_nvfp4_gather_kernel.
_RUNTIME_ARGS = {
    "table_ptr": "*u8", "ids_ptr": "*i64", "gscale_ptr": "*fp32", "out_ptr": None, "n_rows": "i32",
    "device_ptr": "*u8", "device_rows": "i64",
}
_OUT = {"float16": ("*fp16", 0), "bfloat16": ("*bf16", 1), "float32": ("*fp32", 2)}


def parse_arch(arch) -> int:
    """'sm_70' / '70' / 70 / '7.0' -> 70."""
    s = str(arch).strip().lower()
    m = re.fullmatch(r"(?:sm_?)?(\d)\.?(\d+)", s) if "." in s else re.fullmatch(r"(?:sm_?)?(\d+)", s)
    if not m:
        raise ValueError(f"arch: expected a CUDA architecture like sm_70, got {arch!r}")
    return int("".join(m.groups()))


def _compilable_module():
    """nvfp4_gather with a real JITFunction kernel, also when TRITON_INTERPRET=1 is in force."""
    import importlib.util
    import os

    from . import nvfp4_gather as g

    if type(g._ple4_nvfp4_gather_kernel).__name__ != "InterpretedFunction":
        return g
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        spec = importlib.util.spec_from_file_location(g.__name__ + "_aot", g.__file__)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved
    return mod


def _constexprs_variants(fn, values: dict):
    """The shapes ASTSource has accepted for constexprs, newest first."""
    names = list(fn.arg_names)
    by_index_tuple = {(names.index(k),): v for k, v in values.items()}
    yield "index-tuple", by_index_tuple  # 3.3 .. 3.9
    yield "name", dict(values)
    yield "index", {names.index(k): v for k, v in values.items()}  # 3.0 .. 3.2


def compile_gather(arch="sm_70", out_dtype: str = "float16", dim: int = 160, rows: int | None = None, num_warps: int | None = None, layout: int | None = None, tier: int | None = None):
    """Compile the gather kernel for ``arch`` without a GPU; return facts about the result.

    Returns a dict: arch (int), target (the ``.target`` line's value in the PTX), asm (kinds of
    output produced, e.g. ptx and cubin), triton (version), shared (bytes, when known), ptx (text).
    """
    import triton
    from triton.backends.compiler import GPUTarget

    g = _compilable_module()
    cc = parse_arch(arch)
    fn = g._ple4_nvfp4_gather_kernel
    out_ty, out_kind = _OUT[out_dtype]
    params = g._ple4_launch_params(dim, out_kind) if hasattr(g, "_ple4_launch_params") else None
    constexpr_values = dict(params["constexprs"]) if params else {}
    if rows is not None:
        constexpr_values["ROWS"] = rows
    if layout is not None:
        constexpr_values["LAYOUT"] = layout
    if tier is not None:
        constexpr_values["TIER"] = tier
    options = dict(params["options"]) if params else {"num_warps": 4, "enable_fp_fusion": False}
    if num_warps is not None:
        options["num_warps"] = num_warps
    signature = {}
    for name in fn.arg_names:
        if name in _RUNTIME_ARGS:
            signature[name] = _RUNTIME_ARGS[name] or out_ty
        else:
            signature[name] = "constexpr"
    missing = [n for n in fn.arg_names if signature[n] == "constexpr" and n not in constexpr_values]
    if missing:
        raise RuntimeError(f"no value for constexpr argument(s) {missing} of the gather kernel")
    errors = []
    compiled = None
    for shape, constexprs in _constexprs_variants(fn, constexpr_values):
        try:
            src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
        except Exception as exc:  # a shape this Triton does not take
            errors.append(f"{shape}: {type(exc).__name__}: {exc}")
            continue
        try:
            compiled = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=options)
            break
        except Exception as exc:
            errors.append(f"{shape}: {type(exc).__name__}: {exc}")
            # A real compile error shows in every shape; keep trying the others, report all.
    if compiled is None:
        raise RuntimeError("the gather kernel did not compile for sm_%d: %s" % (cc, " | ".join(errors)))
    ptx = compiled.asm.get("ptx", "")
    m = re.search(r"^\.target\s+(\S+)", ptx, re.M)
    meta = getattr(compiled, "metadata", None)
    return {
        "arch": cc,
        "target": m.group(1).rstrip(",") if m else None,
        "asm": sorted(compiled.asm.keys()),
        "triton": triton.__version__,
        "shared": getattr(meta, "shared", None),
        "options": options,
        "constexprs_shape": shape,
        "constexprs": constexpr_values,
        "ptx": ptx,
    }

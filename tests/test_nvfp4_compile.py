"""The NVFP4 gather kernel compiles ahead of time for sm_70 (V100) without a GPU.

``make test`` also runs this file in a second venv with the newest Triton, so it must work with
Triton 3.6 (the engine's) and 3.9 (the newest) alike.
"""

import re

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from ple4patch.kernels import aot  # noqa: E402


@pytest.mark.parametrize("out_dtype", ["float16", "float32", "bfloat16"])
def test_gather_compiles_for_sm70(out_dtype):
    res = aot.compile_gather("sm_70", out_dtype)
    assert res["arch"] == 70 and res["target"] == "sm_70"
    assert re.search(r"^\.target\s+sm_70\b", res["ptx"], re.M)
    assert "cubin" in res["asm"]  # ptxas (bundled with Triton) accepted it for sm_70
    ptx = res["ptx"]
    # No FP8 types or conversions (sm_70 has none): the decode is integer ops and bitcasts.
    assert not re.search(r"e4m3|e5m2|e2m1", ptx)
    # Two separate fp32 multiplies, no contraction into an fma.
    assert "fma.rn.f32" not in ptx and re.search(r"\bmul(\.rn)?\.f32\b", ptx)
    if out_dtype == "float16":
        assert re.search(r"cvt\.rn\.f16\.f32", ptx)  # round-to-nearest-even cast


def test_gather_compiles_for_other_archs():
    assert aot.compile_gather("sm_80")["target"] == "sm_80"


@pytest.mark.parametrize("layout", [0, 1])
def test_both_load_layouts_compile_for_sm70(layout):
    res = aot.compile_gather("sm_70", "float16", layout=layout, rows=16)
    assert res["target"] == "sm_70" and res["constexprs"]["LAYOUT"] == layout
    assert "fma.rn.f32" not in res["ptx"] and not re.search(r"e4m3|e5m2|e2m1", res["ptx"])


@pytest.mark.parametrize("tier", [0, 1, 2])
def test_every_tier_mode_compiles_for_sm70(tier):
    """One launch over both tiers (0), the device tier alone (1), the host or only table (2)."""
    res = aot.compile_gather("sm_70", "float16", tier=tier)
    assert res["target"] == "sm_70" and res["constexprs"]["TIER"] == tier
    assert "fma.rn.f32" not in res["ptx"] and not re.search(r"e4m3|e5m2|e2m1", res["ptx"])


@pytest.mark.parametrize("arch, cc", [("sm_70", 70), ("70", 70), ("7.0", 70), (70, 70), ("SM_90", 90), ("sm_120", 120)])
def test_parse_arch(arch, cc):
    assert aot.parse_arch(arch) == cc


@pytest.mark.parametrize("arch", ["volta", "sm_", "", "7.x"])
def test_parse_arch_rejects_junk(arch):
    with pytest.raises(ValueError, match="arch"):
        aot.parse_arch(arch)

"""NVFP4 row-packed format: reference semantics, packing, and the Triton gather bit for bit.

Without CUDA the kernel runs under the Triton interpreter (TRITON_INTERPRET=1, set here before
the kernel module is decorated); with CUDA the same tests run the compiled kernel on the GPU,
and the tests marked ``gpu`` add pinned-host (UVA) tables, a >= 1 GiB table and high row ids.
"""

import os
import struct

import pytest

from kernel_env import DEV, HAS_CUDA, torch  # noqa: E402  (before the kernels: torch, Triton, the interpreter)
from ple4patch import geometry  # noqa: E402
from ple4patch.kernels import nvfp4  # noqa: E402

DIM = 160
WIDTH = geometry.row_bytes(DIM)
BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

# Global scales: plain, an fp16 rounding tie (1 + 2^-11), fp16 subnormal outputs, a typical
# ModelOpt value, a negative one, one that makes fp32 subnormal products.
GLOBALS = [1.0, 1.0 + 2.0**-11, 2.0**-20, 1.7316e-4, -0.375, 2.0**-127]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    va, vb = a.cpu().view(BITS[a.dtype]), b.cpu().view(BITS[b.dtype])
    diff = (va != vb).nonzero()
    assert diff.numel() == 0, f"{diff.shape[0]} mismatches, first at {diff[:5].tolist()}: {va[tuple(diff[0])]} vs {vb[tuple(diff[0])]}"


def one_row(code, scale):
    """A row whose every element is E2M1 ``code`` and every block scale ``scale``."""
    return torch.tensor([[code | (code << 4)] * (DIM // 2) + [scale] * (DIM // 16)], dtype=torch.uint8)


# ---------------------------------------------------------------- reference semantics


@pytest.mark.parametrize(
    "code, scale, g, expected_bits32",
    [
        (0x7, 0x38, 1.0, 0x40C00000),  # 6.0 * 1.0
        (0x2, 0x01, 1.0, 0x3B000000),  # 1.0 * 2^-9 (smallest subnormal scale)
        (0x3, 0x07, 1.0, 0x3CA80000),  # 1.5 * (7 * 2^-9) = 0.0205078125 = 1.3125 * 2^-6
        (0x1, 0x7E, 1.0, 0x43600000),  # 0.5 * 448
        (0x8, 0x38, 1.0, 0x80000000),  # code 8 is -0.0
        (0x0, 0xB8, 1.0, 0x80000000),  # +0 * -1 = -0
        (0xF, 0xB8, 1.0, 0x40C00000),  # -6 * -1 = 6
        (0x5, 0x3C, 0.5, 0x40100000),  # (3 * 1.5) * 0.5 = 2.25
        (0x7, 0x7F, 1.0, 0x7FC00000),  # scale 0x7F is NaN (canonical out)
        (0xF, 0xFF, 1.0, 0x7FC00000),  # scale 0xFF is NaN too
    ],
)
def test_reference_hand_values(code, scale, g, expected_bits32):
    out = nvfp4.dequant_reference(one_row(code, scale), g, DIM, torch.float32)
    assert out.shape == (1, DIM)
    assert (out.view(torch.int32) == expected_bits32).all(), hex(out.view(torch.int32)[0, 0].item() & 0xFFFFFFFF)


def test_reference_fp16_signed_zero_nan_and_rne():
    assert nvfp4.dequant_reference(one_row(0x8, 0x38), 1.0, DIM).view(torch.int16)[0, 0].item() == -0x8000
    assert nvfp4.dequant_reference(one_row(0x7, 0xFF), 1.0, DIM).view(torch.int16)[0, 0].item() == 0x7E00
    # 1.0 * (1 + 2^-11) is an exact fp16 tie: round-to-nearest-even gives 1.0 (0x3C00).
    assert nvfp4.dequant_reference(one_row(0x2, 0x38), 1.0 + 2.0**-11, DIM).view(torch.int16)[0, 0].item() == 0x3C00
    # 1.0 * (1 + 3 * 2^-11) ties up to the even 1 + 2^-9 (0x3C02).
    assert nvfp4.dequant_reference(one_row(0x2, 0x38), 1.0 + 3 * 2.0**-11, DIM).view(torch.int16)[0, 0].item() == 0x3C02


def test_reference_product_order():
    # (e2m1 * scale) * g rounds once; e2m1 * (scale * g) may round differently.
    g = f32(0.1)
    out = nvfp4.dequant_reference(one_row(0x5, 0x3D), g, DIM, torch.float32)[0, 0].item()
    assert out == f32(f32(3.0 * 1.625) * g)


def test_reference_scales_match_torch_fp8_for_all_codes():
    raw = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    torch_vals = raw.view(torch.float8_e4m3fn).to(torch.float32)
    ours = nvfp4._e4m3fn_table()
    nan = torch.isnan(torch_vals)
    assert nan.nonzero().flatten().tolist() == [0x7F, 0xFF]
    assert torch.isnan(ours[nan]).all()
    assert torch.equal(ours[~nan].view(torch.int32), torch_vals[~nan].view(torch.int32))


def test_reference_e2m1_values():
    assert nvfp4._e2m1_table().tolist()[:8] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    neg = nvfp4._e2m1_table()[8:]
    assert neg.tolist() == [-0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    assert neg.view(torch.int32)[0].item() == -(2**31)  # -0.0, not +0.0


def test_reference_nibble_order_and_block_scales():
    # element 2j = low nibble of byte j, element 2j+1 = high nibble; scale k covers elements 16k..16k+15.
    codes = torch.zeros(1, DIM // 2, dtype=torch.uint8)
    codes[0, 0] = 0x72  # element 0 -> code 2 (1.0), element 1 -> code 7 (6.0)
    codes[0, 8] = 0x01  # element 16 -> code 1 (0.5)
    scales = torch.full((1, DIM // 16), 0x38, dtype=torch.uint8)
    scales[0, 1] = 0x40  # block 1 scale 2.0
    out = nvfp4.dequant_reference(nvfp4.pack_rows(codes, scales), 1.0, DIM, torch.float32)[0]
    assert out[:3].tolist() == [1.0, 6.0, 0.0]
    assert out[16].item() == 1.0 and out[15].item() == 0.0


# ---------------------------------------------------------------- packing


def test_row_geometry_is_the_kernels_layout():
    """`ple4patch.geometry` (torch-free) describes exactly the rows the kernels pack and read."""
    assert (geometry.code_bytes(160), geometry.scale_bytes(160), geometry.row_bytes(160)) == (80, 10, 90)
    for dim in (16, 64, 160, 256):
        codes = torch.zeros((2, geometry.code_bytes(dim)), dtype=torch.uint8)
        scales = torch.full((2, geometry.scale_bytes(dim)), 0x38, dtype=torch.uint8)
        packed = nvfp4.pack_rows(codes, scales)
        assert packed.shape == (2, geometry.row_bytes(dim))
        assert nvfp4.dequant_reference(packed, 1.0, dim).shape == (2, dim)
        with pytest.raises(ValueError):
            nvfp4.dequant_reference(packed[:, :-1], 1.0, dim)


def test_pack_rows_round_trip():
    gen = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 256, (37, DIM // 2), generator=gen, dtype=torch.int32).to(torch.uint8)
    scales = torch.randint(0, 256, (37, DIM // 16), generator=gen, dtype=torch.int32).to(torch.uint8)
    packed = nvfp4.pack_rows(codes, scales)
    assert packed.dtype == torch.uint8 and packed.shape == (37, WIDTH) and packed.is_contiguous()
    assert torch.equal(packed[:, : DIM // 2], codes) and torch.equal(packed[:, DIM // 2 :], scales)
    assert torch.equal(nvfp4.pack_rows(codes, scales.view(torch.float8_e4m3fn)), packed)
    # The reference on packed rows equals a decode straight from the split layout (torch's own FP8).
    ok = (scales & 0x7F) != 0x7F
    ref = nvfp4.dequant_reference(packed, 0.25, DIM, torch.float32)
    e2m1 = nvfp4._e2m1_table()[torch.stack([codes & 15, codes >> 4], 2).reshape(37, DIM).long()]
    direct = (e2m1 * scales.view(torch.float8_e4m3fn).float().repeat_interleave(16, 1)) * 0.25
    mask = ok.repeat_interleave(16, 1)
    assert torch.equal(ref[mask].view(torch.int32), direct[mask].view(torch.int32))
    assert torch.isnan(ref[~mask]).all()


@pytest.mark.parametrize(
    "codes, scales, exc, words",
    [
        (torch.zeros(2, 80, dtype=torch.int8), torch.zeros(2, 10, dtype=torch.uint8), TypeError, "codes"),
        (torch.zeros(2, 80, dtype=torch.uint8), torch.zeros(2, 10, dtype=torch.float16), TypeError, "scales"),
        (torch.zeros(2, 80, dtype=torch.uint8), torch.zeros(2, 9, dtype=torch.uint8), ValueError, "scales"),
        (torch.zeros(2, 80, dtype=torch.uint8), torch.zeros(3, 10, dtype=torch.uint8), ValueError, "scales"),
        (torch.zeros(160, dtype=torch.uint8), torch.zeros(2, 10, dtype=torch.uint8), ValueError, "codes"),
        (torch.zeros(2, 81, dtype=torch.uint8), torch.zeros(2, 10, dtype=torch.uint8), ValueError, "codes"),
    ],
)
def test_pack_rows_rejects_bad_input(codes, scales, exc, words):
    with pytest.raises(exc, match=words):
        nvfp4.pack_rows(codes, scales)


# ---------------------------------------------------------------- gather: input checks


def _args(**kw):
    a = dict(
        table=torch.zeros(4, WIDTH, dtype=torch.uint8),
        ids=torch.zeros(3, dtype=torch.int64),
        global_scale=torch.ones(1, dtype=torch.float32),
        dim=DIM,
    )
    a.update(kw)
    return a


@pytest.mark.parametrize(
    "kw, exc, words",
    [
        (dict(table=torch.zeros(4, WIDTH, dtype=torch.int8)), TypeError, "table.*uint8"),
        (dict(table=torch.zeros(4, 160, dtype=torch.uint8)), ValueError, "table.*90 bytes"),
        (dict(dim=100), ValueError, "dim.*multiple of 16"),
        (dict(ids=torch.zeros(3, dtype=torch.int32)), TypeError, "ids.*int64"),
        (dict(ids=torch.zeros(3, 1, dtype=torch.int64)), ValueError, "ids.*1-D"),
        (dict(global_scale=torch.ones(1, dtype=torch.float64)), ValueError, "global_scale.*float32"),
        (dict(global_scale=torch.ones(2)), ValueError, "global_scale.*one element"),
        (dict(global_scale=1.0), TypeError, "global_scale"),
        (dict(table=torch.zeros(WIDTH, 8, dtype=torch.uint8).t()), ValueError, "table.*stride"),
    ],
)
def test_gather_rejects_bad_input(kw, exc, words):
    with pytest.raises(exc, match=words):
        nvfp4.gather(**_args(**kw))


def test_gather_rejects_bad_out_dtype():
    with pytest.raises(TypeError, match="out_dtype"):
        nvfp4.gather(**_args(), out_dtype=torch.int32)


# ---------------------------------------------------------------- gather == reference, bit for bit


def _run(table, ids, g, out_dtype):
    gt = torch.tensor([g], dtype=torch.float32, device=DEV)
    return nvfp4.gather(table, ids.to(DEV), gt, DIM, out_dtype)


@pytest.fixture(params=[0, 1], ids=["layout0", "layout1"])
def layout(request, monkeypatch):
    """Run a test under each load layout of the kernel (the default and the alternative)."""
    from ple4patch.kernels import nvfp4_gather

    monkeypatch.setattr(nvfp4_gather, "_ple4_LAYOUT", request.param)
    return request.param


@pytest.mark.interpreter
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32, torch.bfloat16])
def test_gather_full_code_space(out_dtype, layout):
    table = nvfp4.full_code_space_table(DIM)
    # every row, shuffled, plus duplicates; 61 ids is not a multiple of the rows per program.
    ids = torch.cat([torch.randperm(table.shape[0], generator=torch.Generator().manual_seed(0)), torch.arange(9)])
    dev_table = table.to(DEV)
    for g in GLOBALS:
        out = _run(dev_table, ids, g, out_dtype)
        bits_equal(out, nvfp4.dequant_reference(table[ids], g, DIM, out_dtype))


@pytest.mark.interpreter
def test_gather_out_in_place_and_empty():
    table = nvfp4.full_code_space_table(DIM).to(DEV)
    g = torch.tensor([0.5], device=DEV)
    ids = torch.tensor([3, 1, 4, 1, 5], device=DEV)
    out = torch.full((5, DIM), 7.0, dtype=torch.float16, device=DEV)
    from ple4patch.kernels.nvfp4_gather import ple4_nvfp4_gather

    res = ple4_nvfp4_gather(table, ids, g, DIM, torch.float16, out=out)
    assert res.data_ptr() == out.data_ptr()
    bits_equal(out, nvfp4.dequant_reference(table.cpu()[ids.cpu()], 0.5, DIM))
    empty = nvfp4.gather(table, torch.zeros(0, dtype=torch.int64, device=DEV), g, DIM)
    assert empty.shape == (0, DIM)


@pytest.mark.interpreter
def test_gather_4096_random_rows_of_a_large_table(layout, monkeypatch):
    if not HAS_CUDA:  # the interpreter's cost is per program: fewer, larger programs (same code)
        from ple4patch.kernels import nvfp4_gather

        monkeypatch.setattr(nvfp4_gather, "_ple4_ROWS_PER_PROGRAM", 64)
    gen = torch.Generator().manual_seed(2)
    rows = 1_000_000
    table = torch.randint(0, 256, (rows, WIDTH), generator=gen, dtype=torch.uint8)
    ids = torch.randint(0, rows, (4093,), generator=gen)
    ids = torch.cat([ids, torch.tensor([0, rows - 1, rows - 1])])
    out = _run(table.to(DEV), ids, 1.7316e-4, torch.float16)
    bits_equal(out, nvfp4.dequant_reference(table[ids], 1.7316e-4, DIM, torch.float16))


@pytest.mark.interpreter
@pytest.mark.skipif(HAS_CUDA, reason="the interpreter reads a sparse mapped file; the GPU variant uses pinned memory")
def test_gather_row_ids_past_2_pow_31_bytes(tmp_path, layout):
    # 48M rows x 90 B = 4.3 GB, sparse: only the rows written here take space.
    rows = 48_000_000
    path = tmp_path / "table.bin"
    with open(path, "wb") as f:
        f.truncate(rows * WIDTH)
    table = torch.from_file(str(path), shared=True, size=rows * WIDTH, dtype=torch.uint8).view(rows, WIDTH)
    probe = [2**31 // WIDTH - 1, 2**31 // WIDTH, 2**31 // WIDTH + 1, 2**32 // WIDTH, 2**32 // WIDTH + 7, rows - 1]
    src = nvfp4.full_code_space_table(DIM)
    for k, r in enumerate(probe):
        table[r] = src[k * 7]
    ids = torch.tensor(probe + [5], dtype=torch.int64)
    expect = nvfp4.dequant_reference(table[ids].clone(), 0.5, DIM, torch.float32)
    assert (expect[:-1] != 0).any(dim=1).all()  # the probed rows hold real data, row 5 is a hole
    out = _run(table, ids, 0.5, torch.float32)
    bits_equal(out, expect)
    # Nothing read (or wrote) the whole mapping.
    assert os.stat(path).st_blocks * 512 < 64 * 2**20
    del table


# ---------------------------------------------------------------- GPU only: UVA and large tables


@gpu
@needs_cuda
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32, torch.bfloat16])
def test_gpu_full_code_space_pinned_host_table(out_dtype, layout):
    table = nvfp4.full_code_space_table(DIM)
    pinned = table.pin_memory()
    ids = torch.cat([torch.randperm(table.shape[0]), torch.arange(5)])
    for g in GLOBALS:
        out = _run(pinned, ids, g, out_dtype)
        assert out.is_cuda
        bits_equal(out, nvfp4.dequant_reference(table[ids], g, DIM, out_dtype))


@gpu
@needs_cuda
def test_gpu_rejects_unpinned_cpu_table():
    with pytest.raises(ValueError, match="pinned"):
        _run(torch.zeros(4, WIDTH, dtype=torch.uint8), torch.zeros(2, dtype=torch.int64), 1.0, torch.float16)


@gpu
@needs_cuda
def test_gpu_4096_random_rows_of_a_1gib_pinned_table(layout):
    rows = (1 << 30) // WIDTH + 1000
    table = torch.empty((rows, WIDTH), dtype=torch.uint8, pin_memory=True)
    table.view(-1)[: rows * WIDTH // 8 * 8].view(torch.int64).random_()
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, rows, (4096,), generator=gen)
    for out_dtype in (torch.float16, torch.float32):
        out = _run(table, ids, 1.7316e-4, out_dtype)
        bits_equal(out, nvfp4.dequant_reference(table[ids], 1.7316e-4, DIM, out_dtype))


@gpu
@needs_cuda
def test_gpu_row_ids_past_2_pow_32_bytes_pinned(layout):
    rows = 48_000_000  # 4.3 GB pinned
    table = torch.empty((rows, WIDTH), dtype=torch.uint8, pin_memory=True)
    probe = [2**31 // WIDTH - 1, 2**31 // WIDTH, 2**31 // WIDTH + 1, 2**32 // WIDTH, 2**32 // WIDTH + 7, rows - 1]
    src = nvfp4.full_code_space_table(DIM)
    for k, r in enumerate(probe):
        table[r] = src[k * 7]
    ids = torch.tensor(probe, dtype=torch.int64)
    out = _run(table, ids, 0.5, torch.float16)
    bits_equal(out, nvfp4.dequant_reference(table[ids], 0.5, DIM, torch.float16))


@gpu
@needs_cuda
def test_gpu_cuda_graph_replay_reads_current_ids():
    table = nvfp4.full_code_space_table(DIM)
    pinned = table.pin_memory()
    g = torch.tensor([0.75], device="cuda")
    ids = torch.zeros(16, dtype=torch.int64, device="cuda")
    out = torch.empty(16, DIM, dtype=torch.float16, device="cuda")
    from ple4patch.kernels.nvfp4_gather import ple4_nvfp4_gather

    ple4_nvfp4_gather(pinned, ids, g, DIM, torch.float16, out=out)  # compile outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ple4_nvfp4_gather(pinned, ids, g, DIM, torch.float16, out=out)
    for seed in range(3):
        new = torch.randint(0, table.shape[0], (16,), generator=torch.Generator().manual_seed(seed))
        ids.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        bits_equal(out, nvfp4.dequant_reference(table[new], 0.75, DIM))

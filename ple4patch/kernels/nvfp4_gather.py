"""Triton gather + decode of NVFP4 row-packed PLE rows (injected verbatim into the engine).

A row of the table is D/2 bytes of E2M1 codes (element 2j in the low nibble of byte j,
element 2j+1 in the high nibble) followed by D/16 E4M3FN block scales (one per 16 elements):
90 bytes for D = 160. value = (e2m1 * block_scale) * global_scale in fp32, then a
round-to-nearest-even cast to the output dtype; every NaN comes out as the canonical quiet
NaN of the output dtype (fp16 0x7E00, bf16 0x7FC0, fp32 0x7FC00000).

The decode uses integer ops and bitcasts only (no FP8 types: sm_70 has none). Signs are
applied as bit 31 (``-x`` in Triton is ``0 - x`` and would lose -0.0). The two products are
separate fp32 multiplies in the reference's order (no add, so nothing to contract).

Rules for this file (its text after the import lines is injected into the engine's
``ple_layer.py``): it imports only torch, triton and triton.language as tl; every top-level name
starts with ``_ple4_`` or ``ple4_``; nothing runs at import besides definitions.
"""

import torch
import triton
import triton.language as tl


# Output dtype -> the kernel's OUT_KIND.
_ple4_OUT_KINDS = {
    torch.float16: 0,
    torch.bfloat16: 1,
    torch.float32: 2,
}

# Tuning (rows per program, warps, load layout); exactness does not depend on these. Measured on
# an H200 (BENCHMARKS.md): every tuning reaches the same rate from n = 16K rows up (the bus's
# request rate for random 32 B sectors is the limit); few rows per program spread small gathers
# over more SMs, which lowers decode-size latency.
_ple4_ROWS_PER_PROGRAM = 2
_ple4_NUM_WARPS = 4
_ple4_LAYOUT = 1
# A table split between device memory and pinned host memory: launches a gather (1: one launch
# reads both tiers; 2: one launch per tier). Measured on an H200 (BENCHMARKS.md).
_ple4_TIER_LAUNCHES = 1
_ple4_LAUNCH_CACHE = {}


@triton.jit
def _ple4_e2m1_bits(code):
    """E2M1 code (int32, 0..15) -> the fp32 bit pattern of its value (int32)."""
    mag = code & 7
    # mag >= 2: 2^((mag >> 1) - 1) * (1 + (mag & 1) / 2); mag == 1: 0.5; mag == 0: 0.
    normal = (((mag >> 1) + 126) << 23) | ((mag & 1) << 22)
    bits = tl.where(mag >= 2, normal, tl.where(mag == 1, 126 << 23, 0))
    return bits | ((code & 8) << 28)


@triton.jit
def _ple4_e4m3fn_bits(s):
    """E4M3FN byte (int32, 0..255) -> the fp32 bit pattern of its value (int32)."""
    e = (s >> 3) & 15
    m = s & 7
    normal = ((e + 120) << 23) | (m << 20)
    # exponent 0: m * 2^-9, normalised: leading bit p of m gives 2^(p - 9), the bits below it
    # move up to the top of the fp32 mantissa.
    p = (m >= 2).to(tl.int32) + (m >= 4).to(tl.int32)
    sub = (((p + 118) << 23) | ((m << (23 - p)) & 0x7FFFFF)) * (m != 0).to(tl.int32)
    bits = tl.where(e == 0, sub, normal)
    bits = tl.where((s & 127) == 127, 0x7FC00000, bits)
    return bits | ((s & 128) << 24)


@triton.jit
def _ple4_decode_store(code, scale_byte, g, out_ptr, out_offs, mask, OUT_KIND: tl.constexpr):
    """value = (e2m1(code) * e4m3fn(scale_byte)) * g in fp32, cast RNE, canonical NaN, stored."""
    a = tl.cast(_ple4_e2m1_bits(code), tl.float32, bitcast=True)
    s = tl.cast(_ple4_e4m3fn_bits(scale_byte), tl.float32, bitcast=True)
    v = a * s  # exact: 2 x 4 significant bits
    v = v * g
    is_nan = v != v
    if OUT_KIND == 2:
        bits32 = tl.cast(v, tl.int32, bitcast=True)
        bits32 = tl.where(is_nan, tl.full(bits32.shape, 0x7FC00000, tl.int32), bits32)
        tl.store(out_ptr + out_offs, tl.cast(bits32, tl.float32, bitcast=True), mask=mask)
    elif OUT_KIND == 1:
        # fp32 -> bf16 round-to-nearest-even in integers (same on every target and the interpreter).
        u = tl.cast(v, tl.uint32, bitcast=True)
        u = (u + (((u >> 16) & 1) + 0x7FFF)) >> 16
        bits16 = tl.cast(u.to(tl.uint16), tl.int16, bitcast=True)
        bits16 = tl.where(is_nan, tl.full(bits16.shape, 0x7FC0, tl.int16), bits16)
        tl.store(out_ptr + out_offs, tl.cast(bits16, tl.bfloat16, bitcast=True), mask=mask)
    else:
        bits16 = tl.cast(v.to(tl.float16), tl.int16, bitcast=True)
        bits16 = tl.where(is_nan, tl.full(bits16.shape, 0x7E00, tl.int16), bits16)
        tl.store(out_ptr + out_offs, tl.cast(bits16, tl.float16, bitcast=True), mask=mask)


@triton.jit
def _ple4_row_bytes(table_ptr, device_ptr, host_base, device_base, in_device, offs, mask, TIER: tl.constexpr):
    """Bytes ``offs`` of the rows, as int32 0..255, from the tier that holds each row.

    TIER 0: both tiers in one launch (two complementary masked loads: a masked-off lane reads
    nothing); TIER 1: the device tier only; TIER 2: the host (or only) table only.
    """
    if TIER == 0:
        lo = tl.load(device_ptr + device_base + offs, mask=mask & in_device, other=0)
        hi = tl.load(table_ptr + host_base + offs, mask=mask & (in_device == 0), other=0)
        raw = lo | hi
    elif TIER == 1:
        raw = tl.load(device_ptr + device_base + offs, mask=mask, other=0)
    else:
        raw = tl.load(table_ptr + host_base + offs, mask=mask, other=0)
    return raw.to(tl.int32) & 255


@triton.jit
def _ple4_nvfp4_gather_kernel(
    table_ptr,
    ids_ptr,
    gscale_ptr,
    out_ptr,
    n_rows,
    device_ptr,
    device_rows,
    DIM: tl.constexpr,
    ROW_BYTES: tl.constexpr,
    BLOCK_D: tl.constexpr,
    ROWS: tl.constexpr,
    OUT_KIND: tl.constexpr,
    LAYOUT: tl.constexpr,
    TIER: tl.constexpr,
):
    # Rows [0, device_rows) of the table are in device_ptr, rows [device_rows, ...) in table_ptr
    # (at row id - device_rows). TIER 0 reads both, TIER 1 / 2 only the rows of one tier and
    # leaves the other rows of the output untouched (one launch per tier). With device_rows = 0
    # and TIER 2 this is the one-table gather.
    pid = tl.program_id(0)
    r = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rmask = r < n_rows
    # 64-bit row offsets: 80M rows x 90 B is past 2^31.
    rid = tl.load(ids_ptr + r, mask=rmask, other=0).to(tl.int64)
    in_device = rid < device_rows
    if TIER == 1:
        rmask = rmask & in_device
    if TIER == 2:
        rmask = rmask & (in_device == 0)
    host_base = tl.where(in_device, 0, rid - device_rows) * ROW_BYTES
    device_base = tl.where(in_device, rid, 0) * ROW_BYTES
    g = tl.load(gscale_ptr).to(tl.float32)
    if LAYOUT == 0:
        # One lane per output element: code byte e // 2 and scale byte D/2 + e // 16 (the repeats
        # within a warp merge into the same requests).
        cols = tl.arange(0, BLOCK_D)
        mask = rmask[:, None] & (cols < DIM)[None, :]
        hb = host_base[:, None]
        db = device_base[:, None]
        dev = in_device[:, None]
        code_byte = _ple4_row_bytes(table_ptr, device_ptr, hb, db, dev, (cols // 2)[None, :], mask, TIER)
        scale_byte = _ple4_row_bytes(table_ptr, device_ptr, hb, db, dev, (DIM // 2 + cols // 16)[None, :], mask, TIER)
        code = (code_byte >> ((cols & 1) * 4)[None, :]) & 15
        _ple4_decode_store(code, scale_byte, g, out_ptr, r[:, None] * DIM + cols[None, :], mask, OUT_KIND)
    else:
        # [rows, 16-element blocks, 8 code bytes]: every byte of a row is loaded once; the two
        # nibbles are joined back into element order (2j, 2j + 1).
        NBLK: tl.constexpr = DIM // 16
        blk = tl.arange(0, BLOCK_D // 16)
        j = tl.arange(0, 8)
        bmask = rmask[:, None] & (blk < NBLK)[None, :]
        code_offs = (blk * 8)[None, :, None] + j[None, None, :]
        code_byte = _ple4_row_bytes(
            table_ptr, device_ptr, host_base[:, None, None], device_base[:, None, None],
            in_device[:, None, None], code_offs, bmask[:, :, None], TIER,
        )
        scale_byte = _ple4_row_bytes(
            table_ptr, device_ptr, host_base[:, None], device_base[:, None], in_device[:, None],
            (DIM // 2 + blk)[None, :], bmask, TIER,
        )
        code = tl.reshape(tl.join(code_byte & 15, code_byte >> 4), [ROWS, BLOCK_D // 16, 16])
        e = tl.arange(0, 16)
        out_offs = r[:, None, None] * DIM + (blk * 16)[None, :, None] + e[None, None, :]
        _ple4_decode_store(code, scale_byte[:, :, None], g, out_ptr, out_offs, bmask[:, :, None], OUT_KIND)


def ple4_nvfp4_gather(table, ids, global_scale, dim, out_dtype=torch.float16, out=None, device_table=None, launches=None):
    """Gather rows ``ids`` of the row-packed NVFP4 table and decode them.

    table: uint8 [R, dim//2 + dim//16] with unit column stride (CUDA tensor, UVA view or pinned
    CPU tensor; a CPU tensor under TRITON_INTERPRET=1). ids: int64 1-D on the output device.
    global_scale: float32 1-element tensor on the output device. out: optional contiguous
    [len(ids), dim] tensor of out_dtype, written in place. Returns the [len(ids), dim] output.

    device_table: optional second tier, uint8 [V, same row width] with the same row stride:
    it holds rows 0..V-1 of the table, and ``table`` holds rows V.. (row id i at table[i - V]).
    launches: 1 (both tiers in one launch) or 2 (one launch per tier); None takes the default.
    """
    n = ids.shape[0]
    if out is None:
        out = torch.empty((n, dim), dtype=out_dtype, device=ids.device)
    if n == 0:
        return out
    device_rows = 0 if device_table is None else device_table.shape[0]
    if device_rows and table.shape[0] == 0:  # the whole table is in the device tier
        table, device_table, device_rows = device_table, None, 0
    if device_rows == 0:
        tiers = (2,)
        device_table = table
    elif (_ple4_TIER_LAUNCHES if launches is None else launches) == 1:
        tiers = (0,)
    else:
        tiers = (1, 2)
    for tier in tiers:
        key = (dim, out.dtype, table.stride(0), tier, _ple4_LAYOUT, _ple4_ROWS_PER_PROGRAM, _ple4_NUM_WARPS)
        launch = _ple4_LAUNCH_CACHE.get(key)
        if launch is None:  # once per shape: keep the per-call Python work small (decode latency)
            p = _ple4_launch_params(dim, _ple4_OUT_KINDS[out.dtype], table.stride(0), tier=tier)
            launch = (p["constexprs"]["ROWS"], {**p["options"], **p["constexprs"]})
            _ple4_LAUNCH_CACHE[key] = launch
        rows, kwargs = launch
        grid = ((n + rows - 1) // rows,)
        _ple4_nvfp4_gather_kernel[grid](table, ids, global_scale, out, n, device_table, device_rows, **kwargs)
    return out


def _ple4_launch_params(dim, out_kind, row_bytes=None, rows=None, num_warps=None, layout=None, tier=2):
    """Compile-time arguments and options of a launch (shared with ahead-of-time compiles and
    the benchmarks, which pass rows/num_warps/layout to try other tunings). tier: 2 for one
    table (or the host tier alone), 0 for both tiers in one launch, 1 for the device tier alone."""
    return {
        "constexprs": {
            "DIM": dim,
            "ROW_BYTES": dim // 2 + dim // 16 if row_bytes is None else row_bytes,
            "BLOCK_D": triton.next_power_of_2(dim),
            "ROWS": _ple4_ROWS_PER_PROGRAM if rows is None else rows,
            "OUT_KIND": out_kind,
            "LAYOUT": _ple4_LAYOUT if layout is None else layout,
            "TIER": tier,
        },
        # No FP contraction: the reference's two multiplies must stay two roundings.
        "options": {"num_warps": _ple4_NUM_WARPS if num_warps is None else num_warps, "enable_fp_fusion": False},
    }

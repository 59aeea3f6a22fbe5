"""The NVFP4 row-packed PLE format: packing, the CPU reference decode, and the GPU gather.

A row-packed row is the D/2 code bytes of a row (E2M1 nibbles, element 2j in the low nibble of
byte j) followed by its D/16 E4M3FN block scales: 90 bytes for D = 160. One fp32 global scale
multiplies the table.

``dequant_reference`` defines the semantics; the Triton kernel must match it bit for bit:

- E2M1 code: sign = bit 3, magnitude index bits 0..2 -> 0, 0.5, 1, 1.5, 2, 3, 4, 6 (code 8 is -0.0).
- E4M3FN scale: all 256 codes decoded with integer ops into fp32 bit patterns: sign bit 7,
  exponent bits 3..6 (bias 7), mantissa bits 0..2, exponent 0 subnormal (m * 2^-9), 0x7F and
  0xFF NaN, no infinities.
- value = (e2m1 * scale) * global in fp32 (the first product is exact), then cast to the output
  dtype with round-to-nearest-even. Signed zeros follow IEEE arithmetic; every NaN comes out as
  the canonical quiet NaN of the output dtype (fp16 0x7E00, bf16 0x7FC0, fp32 0x7FC00000).

This package imports nothing from the rest of ple4patch (its code runs inside the engine).
"""

from __future__ import annotations

import os

import torch

__all__ = ["pack_rows", "dequant_reference", "gather", "full_code_space_table", "SUPPORTED_OUT_DTYPES", "CANONICAL_NAN_BITS"]

SUPPORTED_OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# Bit pattern of the NaN the reference (and the kernel) writes, per output dtype.
CANONICAL_NAN_BITS = {
    torch.float16: 0x7E00,
    torch.bfloat16: 0x7FC0,
    torch.float32: 0x7FC00000,
}

_BITS_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}


def _e2m1_table() -> torch.Tensor:
    """fp32 values of the 16 E2M1 codes, built from integer bit patterns."""
    code = torch.arange(16, dtype=torch.int32)
    mag = code & 7
    normal = (((mag >> 1) + 126) << 23) | ((mag & 1) << 22)
    bits = torch.where(mag >= 2, normal, torch.where(mag == 1, torch.full_like(mag, 126 << 23), torch.zeros_like(mag)))
    bits = bits | ((code & 8) << 28)
    return bits.view(torch.float32)


def _e4m3fn_table() -> torch.Tensor:
    """fp32 values of all 256 E4M3FN codes, built from integer bit patterns."""
    s = torch.arange(256, dtype=torch.int32)
    e = (s >> 3) & 15
    m = s & 7
    normal = ((e + 120) << 23) | (m << 20)
    p = (m >= 2).to(torch.int32) + (m >= 4).to(torch.int32)
    sub = (((p + 118) << 23) | ((m << (23 - p)) & 0x7FFFFF)) * (m != 0).to(torch.int32)
    bits = torch.where(e == 0, sub, normal)
    bits = torch.where((s & 127) == 127, torch.full_like(bits, 0x7FC00000), bits)
    bits = bits | ((s & 128) << 24)
    return bits.view(torch.float32)


def _check_tensor(name: str, t, dtypes: tuple, dim: int) -> None:
    """TypeError/ValueError naming `name` unless `t` is a tensor of one of `dtypes` with `dim` dims."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"{name}: expected dtype {' or '.join(str(d) for d in dtypes)}, got {t.dtype}")
    if t.dim() != dim:
        raise ValueError(f"{name}: expected a {dim}-D tensor, got shape {tuple(t.shape)}")


def _check_uint8_2d(name: str, t, width: int | None = None) -> None:
    _check_tensor(name, t, (torch.uint8,), 2)
    if width is not None and t.shape[1] != width:
        raise ValueError(f"{name}: expected {width} bytes a row, got shape {tuple(t.shape)}")


def _check_dim(dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 16:
        raise ValueError(f"dim: expected a positive multiple of 16 (elements a row), got {dim!r}")
    return dim


def _check_out_dtype(out_dtype) -> None:
    if out_dtype not in SUPPORTED_OUT_DTYPES:
        raise TypeError(
            f"out_dtype: expected one of torch.float16, torch.bfloat16, torch.float32, got {out_dtype!r}"
        )


def pack_rows(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """NVIDIA's split layout -> row-packed rows.

    codes: uint8 [N, D/2] (E2M1 nibbles); scales: [N, D/16] as uint8 or torch.float8_e4m3fn.
    Returns a new contiguous uint8 [N, D/2 + D/16] tensor on the codes' device.
    """
    _check_uint8_2d("codes", codes)
    _check_tensor("scales", scales, (torch.uint8, torch.float8_e4m3fn), 2)
    if scales.dtype == torch.float8_e4m3fn:
        scales = scales.view(torch.uint8)
    n, half = codes.shape
    if half % 8:
        raise ValueError(f"codes: expected D/2 bytes a row with D a multiple of 16, got shape {tuple(codes.shape)}")
    if tuple(scales.shape) != (n, half // 8):
        raise ValueError(
            f"scales: expected shape {(n, half // 8)} (one scale per 16 elements of codes' rows), "
            f"got {tuple(scales.shape)}"
        )
    if scales.device != codes.device:
        raise ValueError(f"scales: expected device {codes.device} (the codes' device), got {scales.device}")
    return torch.cat([codes, scales], dim=1).contiguous()


def dequant_reference(packed: torch.Tensor, global_scale, dim: int, out_dtype=torch.float16) -> torch.Tensor:
    """Decode row-packed rows on the CPU: the definition the kernel must match bit for bit.

    packed: uint8 [N, dim/2 + dim/16]; global_scale: a float or a 1-element tensor (taken as
    float32). Returns a CPU tensor [N, dim] of out_dtype.
    """
    dim = _check_dim(dim)
    _check_out_dtype(out_dtype)
    _check_uint8_2d("packed", packed, dim // 2 + dim // 16)
    g = torch.as_tensor(global_scale).detach().to("cpu", torch.float32).reshape(-1)
    if g.numel() != 1:
        raise ValueError(f"global_scale: expected one element, got {g.numel()}")
    packed = packed.to("cpu")
    n = packed.shape[0]
    codes = packed[:, : dim // 2].to(torch.int64)
    nib = torch.stack([codes & 15, codes >> 4], dim=2).reshape(n, dim)
    a = _e2m1_table()[nib]
    s = _e4m3fn_table()[packed[:, dim // 2 :].to(torch.int64)].repeat_interleave(16, dim=1)
    v = a * s  # exact in fp32
    v = v * g
    out = v.to(out_dtype)
    bits = out.view(_BITS_VIEW[out_dtype])
    bits[torch.isnan(v)] = CANONICAL_NAN_BITS[out_dtype]
    return out


def gather(
    table: torch.Tensor,
    ids: torch.Tensor,
    global_scale: torch.Tensor,
    dim: int,
    out_dtype=torch.float16,
    *,
    device_table: torch.Tensor | None = None,
    launches: int | None = None,
) -> torch.Tensor:
    """Gather rows ``ids`` of a row-packed table and decode them with the Triton kernel.

    table: uint8 [R, dim//2 + dim//16], unit column stride: a CUDA tensor, a UVA view or a pinned
    CPU tensor (a plain CPU tensor under TRITON_INTERPRET=1). ids: int64 1-D; global_scale:
    float32 1-element tensor, both on the output device. Returns [len(ids), dim] of out_dtype.
    Without a CUDA device and without TRITON_INTERPRET=1 (set before triton is imported) it
    raises a RuntimeError that says so, before Triton would fail on its own.

    A table split in two tiers: ``device_table`` (uint8 [V, dim//2 + dim//16], on the ids'
    device, or on the CPU under TRITON_INTERPRET=1) holds rows 0..V-1 and ``table`` rows
    V..V+R-1, so row id i >= V is ``table[i - V]``. ``launches`` picks one launch reading both
    tiers (1) or one launch per tier (2); by default the faster one (see nvfp4_gather).
    """
    dim = _check_dim(dim)
    _check_out_dtype(out_dtype)
    width = dim // 2 + dim // 16
    _check_uint8_2d("table", table, width)
    _check_rows_stride("table", table)
    if device_table is not None:
        _check_uint8_2d("device_table", device_table, width)
        _check_rows_stride("device_table", device_table)
        if table.shape[0] and device_table.shape[0] and device_table.stride(0) != table.stride(0):
            raise ValueError(
                f"device_table: expected the row stride of table ({table.stride(0)}), got {device_table.stride(0)}"
            )
    if launches not in (None, 1, 2):
        raise ValueError(f"launches: expected 1 or 2 (or None for the default), got {launches!r}")
    _check_tensor("ids", ids, (torch.int64,), 1)
    if not isinstance(global_scale, torch.Tensor):
        raise TypeError(f"global_scale: expected a float32 1-element torch.Tensor, got {type(global_scale).__name__}")
    if global_scale.dtype != torch.float32 or global_scale.numel() != 1:
        raise ValueError(
            f"global_scale: expected a float32 tensor of one element, got {global_scale.dtype} "
            f"shape {tuple(global_scale.shape)}"
        )
    if global_scale.device != ids.device:
        raise ValueError(f"global_scale: expected device {ids.device} (the ids' device), got {global_scale.device}")
    if ids.device.type == "cuda" and table.device.type == "cpu" and table.numel() and not table.is_pinned():
        raise ValueError("table: a CPU table must be pinned (page-locked) for the GPU to read it; use .pin_memory()")
    if device_table is not None and ids.device.type == "cuda" and device_table.device != ids.device:
        raise ValueError(f"device_table: expected device {ids.device} (the ids' device), got {device_table.device}")
    _require_a_place_to_run(ids)
    from .nvfp4_gather import ple4_nvfp4_gather

    return ple4_nvfp4_gather(
        table, ids.contiguous(), global_scale.reshape(1).contiguous(), dim, out_dtype,
        device_table=device_table, launches=launches,
    )


INTERPRET_ENV = "TRITON_INTERPRET"


def _require_a_place_to_run(ids: torch.Tensor) -> None:
    """The kernel runs compiled on a CUDA device, or on the CPU under the Triton interpreter
    (TRITON_INTERPRET=1 when Triton decorated it). Anything else gets an error saying which
    and what to do, before Triton's own ("0 active drivers")."""
    from . import nvfp4_gather

    if type(nvfp4_gather._ple4_nvfp4_gather_kernel).__name__ == "InterpretedFunction":
        return
    if torch.cuda.is_available() and ids.device.type == "cuda":
        return
    cpu = (
        f"to run it on the CPU, set {INTERPRET_ENV}=1 before triton is imported (in the shell: "
        f"`{INTERPRET_ENV}=1 python your_script.py`), and the Triton interpreter runs it"
    )
    if os.environ.get(INTERPRET_ENV, "") not in ("", "0"):
        cpu = (
            f"{INTERPRET_ENV} is set, but only after triton compiled the kernel for a GPU (triton or "
            f"ple4patch.kernels.nvfp4_gather was imported before it was set): set {INTERPRET_ENV}=1 "
            f"before triton is imported (in the shell: `{INTERPRET_ENV}=1 python your_script.py`)"
        )
    if not torch.cuda.is_available():
        raise RuntimeError(f"gather: no CUDA device was found (torch.cuda.is_available() is False) and the "
                           f"Triton kernel is compiled for one; {cpu}")
    raise ValueError(f"ids: expected a CUDA tensor (the kernel runs on the GPU), got device {ids.device}; "
                     f"move ids and global_scale to the GPU (device=\"cuda\"), or {cpu}")


def _check_rows_stride(name: str, t: torch.Tensor) -> None:
    if t.shape[0] and t.stride(1) != 1:
        raise ValueError(f"{name}: expected unit column stride (rows of contiguous bytes), got strides {t.stride()}")


def full_code_space_table(dim: int = 160) -> torch.Tensor:
    """Row-packed rows that hold every E2M1 code in both nibble positions under every scale byte.

    Each of the 256 scale bytes gets two 16-element blocks: in the first, byte j holds code j in
    its low nibble and code j + 8 in its high nibble; in the second the other way round. The
    512 blocks fill rows of dim/16 blocks (the last row is padded with scale-0x00 blocks).
    Returns a CPU uint8 tensor [ceil(512 / (dim/16)), dim/2 + dim/16].
    """
    dim = _check_dim(dim)
    nblk = dim // 16
    j = torch.arange(8, dtype=torch.int32)
    block_a = (j | ((j + 8) << 4)).to(torch.uint8)
    block_b = ((j + 8) | (j << 4)).to(torch.uint8)
    blocks = torch.stack([block_a, block_b]).repeat(256, 1)  # [512, 8] code bytes
    scale = torch.arange(256, dtype=torch.int32).repeat_interleave(2).to(torch.uint8)  # [512]
    rows = -(-512 // nblk)
    pad = rows * nblk - 512
    if pad:
        blocks = torch.cat([blocks, torch.stack([block_a, block_b]).repeat(pad, 1)[:pad]])
        scale = torch.cat([scale, torch.zeros(pad, dtype=torch.uint8)])
    codes = blocks.reshape(rows, nblk * 8)
    return pack_rows(codes, scale.reshape(rows, nblk))

"""Row geometry of the NVFP4 row-packed table, without torch.

A row of D values is D/2 bytes of E2M1 nibbles (two values a byte, low nibble = even
element) followed by D/16 E4M3 block scales (one per 16 values): D//2 + D//16 bytes
(90 for D = 160). The injected files in ``ple4patch/kernels`` keep their own literals,
since they must stand alone inside the engine.
"""

from __future__ import annotations

BLOCK = 16  # values per E4M3 block scale


def code_bytes(dim: int) -> int:
    """Bytes of E2M1 codes in a row of `dim` values."""
    return dim // 2


def scale_bytes(dim: int) -> int:
    """Bytes of block scales in a row of `dim` values."""
    return dim // BLOCK


def row_bytes(dim: int) -> int:
    """Bytes of one packed row: codes then block scales."""
    return code_bytes(dim) + scale_bytes(dim)

"""Where a rank's PLE rows go: how many the host budget lets into pinned host memory, the rest in VRAM.

Torch-free arithmetic that mirrors the engine's FP8 path, so that ``inspect``
can say before launch what each rank will pin:

- the budget is ``VLLM_QWEN4EXP_PLE_HOST_GIB`` in GiB = 2**30 bytes, ``int(gib * 2**30)``,
  finite and non-negative (``_ple_host_budget_bytes`` in
  vllm/models/qwen4_exp/nvidia/ple_layer.py of 1CatAI/1Cat-vLLM at
  036318a0dbcc716c02208e5b32f13175e0aedc30; ``env_gib_bytes`` / ``ple_host_budget_bytes``
  in vllm/models/qwen4_exp/common/ple.py at 04d890fc826002187863162208bf77c9b97bc8dc,
  which ``_plan_placement`` in ple_layer.py at 15a8d185799b03092331be5a6fbf197bf05fa3c2 uses
  as given);
- host rows = min(rows, budget // row bytes), the rest in VRAM (``plan_ple_placement``
  without a device budget, common/ple.py at 04d890fc); a budget of 0 puts every row in VRAM;
  each table (one per PLE layer) is placed on its own with the whole budget, as each
  ``Qwen4ExpPinnedHostEmbedding`` plans its own;
- an NVFP4 table's host rows are pinned by the patched loader as one plain page-aligned
  allocation registered with ``cudaHostRegister`` (``kernels.nvfp4_host``): rows x row bytes
  rounded up to a 4096-byte page, nothing more (``PIN_PAGE``);
- an FP8 table's host rows are pinned by the engine itself with ``torch.empty(...,
  pin_memory=True)`` (``Qwen4ExpPinnedHostEmbedding.materialize_tables`` in ple_layer.py at
  1CatAI/1Cat-vLLM 036318a0 and 15a8d185; the whole ``weight`` at rapatel0/1Cat-vLLM
  a223f046), that is through torch's caching host allocator, which rounds every request up to
  the next power of two (``c10::llvm::PowerOf2Ceil`` in aten/src/ATen/core/CachingHostAllocator.h,
  torch 2.13, unless PYTORCH_CUDA_ALLOC_CONF sets ``pinned_max_round_threshold``): measured,
  12,800,061,440 B asked -> 17,179,869,184 B pinned per TP4 rank (BENCHMARKS.md,
  fp8-stock-alloc) (``PIN_POWER_OF_TWO``). The releases that register the FP8 table exactly
  instead (``_ple_pinned_host_empty`` at cookys/1Cat-vLLM 1b5731f9, ``allocate_host_table``
  at Qixiao02/1Cat-vLLM 0aac941e) pin it to the page (``venv_engine.fp8_pin_rule``);
- ``check_ple_host_share`` (common/ple.py at 04d890fc) refuses to start when the configured
  budget exceeds each rank's share of the host, max(0, MemAvailable - MemTotal // 4) // ranks
  (the reserve is ``VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB`` when set).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping

PAGE_BYTES = 4096
GIB = 2**30
HOST_BUDGET_ENV = "VLLM_QWEN4EXP_PLE_HOST_GIB"
HOST_RESERVE_ENV = "VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB"
HOST_BUDGET_OPTION = "--host-budget-gib"


PIN_PAGE = "page"  # rows x row bytes up to a 4096-byte page
PIN_POWER_OF_TWO = "power_of_two"  # torch's caching host allocator: up to the next power of two


def power_of_two_rounded(nbytes: int) -> int:
    """Bytes torch's caching host allocator pins for a request of ``nbytes``: the next power of
    two (0 stays 0: the engine pins nothing for no rows)."""
    return 0 if nbytes <= 0 else 1 << (nbytes - 1).bit_length()


def page_rounded(nbytes: int) -> int:
    """Bytes a pinned allocation of ``nbytes`` takes: up to the next 4096-byte page (0 stays 0)."""
    return -(-nbytes // PAGE_BYTES) * PAGE_BYTES


# What to do about a bad value, by where it was given. The engine refuses a bad value of either
# variable as well (_ple_host_budget_bytes and _ple_host_reserve_bytes in ple_layer.py at
# 1CatAI/1Cat-vLLM 036318a0dbcc716c02208e5b32f13175e0aedc30).
_GIB_ADVICE = {
    HOST_BUDGET_ENV: f"unset {HOST_BUDGET_ENV} (no budget) or set it to a non-negative number of GiB, "
                     "such as 4 (0 puts every row in VRAM)",
    HOST_RESERVE_ENV: f"unset {HOST_RESERVE_ENV} (the engine then keeps a quarter of MemTotal) or set it to a "
                      "non-negative number of GiB",
    HOST_BUDGET_OPTION: f"give {HOST_BUDGET_OPTION} a non-negative number of GiB, such as 4 (0 puts every row "
                        "in VRAM)",
}


def _bad_gib(name: str, value: object) -> ValueError:
    advice = _GIB_ADVICE.get(name, "give a non-negative number of GiB")
    return ValueError(f"{name} must be a finite, non-negative number of GiB, got {value!r} (the engine "
                      f"refuses it too): {advice}")


def gib_bytes(gib: float, name: str) -> int:
    """``gib`` GiB in bytes as the engine converts it; ValueError (naming ``name``) when not finite and >= 0."""
    if isinstance(gib, bool) or not isinstance(gib, (int, float)) or not math.isfinite(gib) or gib < 0:
        raise _bad_gib(name, gib)
    return int(gib * GIB)


def _env_gib(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise _bad_gib(name, raw) from None
    return gib_bytes(value, name)


def host_budget(option_gib: float | None, environ: Mapping[str, str] | None = None) -> tuple[int | None, str | None]:
    """(budget bytes per rank, where it came from): the option, else the engine's variable, else (None, None)."""
    if option_gib is not None:
        return gib_bytes(option_gib, HOST_BUDGET_OPTION), HOST_BUDGET_OPTION
    budget = _env_gib(os.environ if environ is None else environ, HOST_BUDGET_ENV)
    return (budget, HOST_BUDGET_ENV) if budget is not None else (None, None)


def host_reserve(total_bytes: int, environ: Mapping[str, str] | None = None) -> int:
    """Host memory the engine's share check leaves to everything else: the variable, else MemTotal // 4.
    ValueError (saying what to do) when the variable is not a finite, non-negative number."""
    reserve = _env_gib(os.environ if environ is None else environ, HOST_RESERVE_ENV)
    return total_bytes // 4 if reserve is None else reserve


def host_share(available_bytes: int, reserve_bytes: int, ranks: int) -> int:
    """Each rank's share of the host's memory, as the engine's check_ple_host_share counts it."""
    return max(0, available_bytes - reserve_bytes) // ranks


@dataclass(frozen=True)
class Placement:
    """One table's rows on one rank: ``host_rows`` pinned in host memory, ``vram_rows`` in VRAM."""

    rows: int
    row_bytes: int
    host_rows: int
    pinned_by: str = PIN_PAGE  # how the host rows are pinned: PIN_PAGE or PIN_POWER_OF_TWO

    @property
    def vram_rows(self) -> int:
        return self.rows - self.host_rows

    @property
    def host_bytes(self) -> int:
        return self.host_rows * self.row_bytes

    @property
    def pinned_bytes(self) -> int:
        """What the host rows pin: their bytes up to the next page, or up to the next power of
        two through torch's caching host allocator."""
        if self.pinned_by == PIN_POWER_OF_TWO:
            return power_of_two_rounded(self.host_bytes)
        return page_rounded(self.host_bytes)

    @property
    def vram_bytes(self) -> int:
        return self.vram_rows * self.row_bytes


def place_rows(rows: int, row_bytes: int, budget_bytes: int | None, pinned_by: str = PIN_PAGE) -> Placement:
    """Split a rank's ``rows`` between pinned host memory (as many as the budget holds) and VRAM.

    ``budget_bytes`` None: no host budget, every row in host memory. ``pinned_by``: how the
    host rows are pinned (``PIN_PAGE``, ``PIN_POWER_OF_TWO``).
    """
    if pinned_by not in (PIN_PAGE, PIN_POWER_OF_TWO):
        raise ValueError(f"pinned_by must be {PIN_PAGE!r} or {PIN_POWER_OF_TWO!r}, got {pinned_by!r}")
    if rows < 0 or row_bytes <= 0:
        raise ValueError(f"rows must be >= 0 and row_bytes > 0, got {rows} and {row_bytes}")
    if budget_bytes is None:
        return Placement(rows, row_bytes, rows, pinned_by)
    if budget_bytes < 0:
        raise ValueError(f"the host budget must be >= 0 bytes, got {budget_bytes}")
    return Placement(rows, row_bytes, min(rows, budget_bytes // row_bytes), pinned_by)

"""Where the NVFP4 PLE table's rows live: exact pinned host memory and VRAM (injected verbatim).

A rank's rows are split in two consecutive tiers, as the engine's FP8 path splits its table:
rows [0, vram_rows) in device memory, rows [vram_rows, rows) in pinned host memory that the GPU
reads through UVA. ``ple4_plan_placement`` is the arithmetic; ``Ple4PinnedHostRows`` is the host
tier: a plain page-aligned anonymous mapping, page-locked and mapped with ``cudaHostRegister``,
so it pins rows x row bytes rounded up to one page (torch's caching host allocator, behind
``torch.empty(..., pin_memory=True)``, rounds every request up to a power of two: 8 GiB for a
6.71 GiB share). ``Ple4NvFp4Tiers`` holds both tiers and copies checkpoint rows into them.

Release: unregister, then unmap; explicitly (``release()``) or when the host tier is collected.
The mapping is unmapped once no tensor over it is left (a tensor keeps its memory valid).

Rules for this file (its text after the import lines is injected into the engine's
``ple_layer.py``): it imports only the standard library and torch; every top-level name starts
with ``_ple4_``, ``ple4_`` or ``Ple4``; nothing runs at import besides definitions.
"""

import mmap
import weakref

import torch

_ple4_PAGE_BYTES = mmap.PAGESIZE
# cudaHostRegisterPortable | cudaHostRegisterMapped: usable from every context, UVA-mapped.
_ple4_HOST_REGISTER_FLAGS = 0x01 | 0x02
_ple4_GIB = 1024**3


def ple4_plan_placement(rows: int, row_bytes: int, host_budget_bytes: int | None) -> tuple[int, int]:
    """(VRAM rows, host rows) of a rank's ``rows`` rows of ``row_bytes`` each.

    No budget (None): every row in host memory. Otherwise as the engine's FP8 placement without
    a device budget (``plan_ple_placement`` in vllm/models/qwen4_exp/common/ple.py of
    1CatAI/1Cat-vLLM, commit 04d890fc826002187863162208bf77c9b97bc8dc): host rows =
    min(rows, budget // row_bytes), the rest in VRAM; a budget of 0 puts every row in VRAM.
    """
    if rows < 0 or row_bytes <= 0:
        raise ValueError(f"rows must be non-negative and row_bytes positive, got {rows} and {row_bytes}")
    if host_budget_bytes is None:
        return 0, rows
    if host_budget_bytes < 0:
        raise ValueError(f"the host budget must be non-negative, got {host_budget_bytes} bytes")
    host_rows = min(rows, host_budget_bytes // row_bytes)
    return rows - host_rows, host_rows


def ple4_page_rounded(nbytes: int) -> int:
    """Bytes a host tier of ``nbytes`` maps and pins: rounded up to whole pages."""
    return -(-nbytes // _ple4_PAGE_BYTES) * _ple4_PAGE_BYTES


def _ple4_meminfo_bytes(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _ple4_gib(nbytes: int | None) -> str:
    return "unknown" if nbytes is None else f"{nbytes / _ple4_GIB:.2f} GiB"


def _ple4_cuda_host_register(ptr: int, nbytes: int) -> None:
    """Page-lock and UVA-map [ptr, ptr + nbytes) (raises RuntimeError naming the CUDA error)."""
    err = torch.cuda.cudart().cudaHostRegister(ptr, nbytes, _ple4_HOST_REGISTER_FLAGS)
    if int(err) != 0:
        raise RuntimeError(f"cudaHostRegister returned {err!r}")


def _ple4_cuda_host_unregister(ptr: int) -> None:
    err = torch.cuda.cudart().cudaHostUnregister(ptr)
    if int(err) != 0:
        raise RuntimeError(f"cudaHostUnregister returned {err!r}")


def _ple4_pin_failure(what: str, nbytes: int, cause: str) -> RuntimeError:
    return RuntimeError(
        f"{what}: could not pin {nbytes} bytes ({_ple4_gib(nbytes)}) of host memory ({cause}); the "
        f"host has {_ple4_gib(_ple4_meminfo_bytes('MemAvailable'))} available (MemAvailable) and "
        "every tensor-parallel rank pins its own share. Free host memory, raise the locked-memory "
        "limit (ulimit -l) where it is lower, or put part of the table in VRAM with a smaller "
        "per-rank host budget (VLLM_QWEN4EXP_PLE_HOST_GIB, on engine releases that have it)"
    )


class _ple4_HostMapping:
    """The mapping and registration of one host tier; ``release`` undoes both, once."""

    def __init__(self, mapping, ptr: int, nbytes: int) -> None:
        self.mapping = mapping
        self.ptr = ptr
        self.nbytes = nbytes
        self.registered = False

    def release(self) -> None:
        # Only the reference goes here: torch.frombuffer keeps the mapping alive, without a
        # buffer export, for as long as any tensor over it exists, and unmaps it after the last.
        try:
            if self.registered:
                self.registered = False
                _ple4_cuda_host_unregister(self.ptr)
        finally:
            self.mapping = None


class Ple4PinnedHostRows:
    """``rows`` x ``row_bytes`` bytes of host memory, page-locked and UVA-mapped when ``pin``.

    ``tensor`` is the uint8 [rows, row_bytes] view (zeros at first). Pins exactly the bytes
    asked for, rounded up to a page (``mapped_bytes``). A failure releases what was done and
    says how much was asked for and what the host has available.
    """

    def __init__(self, rows: int, row_bytes: int, *, pin: bool, what: str = "NVFP4 PLE table") -> None:
        self.nbytes = rows * row_bytes
        self.mapped_bytes = ple4_page_rounded(self.nbytes)
        self.pinned = False
        self._mapping = None
        if self.nbytes == 0:
            self.tensor = torch.empty((rows, row_bytes), dtype=torch.uint8)
            return
        available = _ple4_meminfo_bytes("MemAvailable")
        if pin and available is not None and self.mapped_bytes > available:
            raise _ple4_pin_failure(what, self.nbytes, "more than the host has available")
        try:
            mapping = mmap.mmap(-1, self.mapped_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except (OSError, ValueError) as exc:
            raise _ple4_pin_failure(what, self.nbytes, f"the allocation failed: {exc}") from exc
        if hasattr(mmap, "MADV_HUGEPAGE"):
            try:  # fewer page faults while the pages are locked; exactness does not depend on it
                mapping.madvise(mmap.MADV_HUGEPAGE)
            except OSError:
                pass
        tensor = torch.frombuffer(mapping, dtype=torch.uint8, count=self.nbytes)
        state = _ple4_HostMapping(mapping, tensor.data_ptr(), self.mapped_bytes)
        if pin:
            try:
                _ple4_cuda_host_register(state.ptr, self.mapped_bytes)
            except Exception as exc:
                del tensor, mapping
                state.release()  # nothing registered; the mapping goes with the last reference
                raise _ple4_pin_failure(what, self.nbytes, str(exc)) from exc
            state.registered = True
            self.pinned = True
        self.tensor = tensor.view(rows, row_bytes)
        self._mapping = state
        finalizer = weakref.finalize(self, state.release)
        finalizer.atexit = False  # at exit the process's memory goes with it
        self._finalizer = finalizer

    @property
    def ptr(self) -> int:
        return 0 if self._mapping is None else self._mapping.ptr

    def release(self) -> None:
        """Unregister, then unmap once no tensor over the rows is left (idempotent). The GPU may
        not read the rows after it."""
        self.tensor = None
        self.pinned = False
        if self._mapping is not None:
            self._finalizer.detach()
            mapping, self._mapping = self._mapping, None
            mapping.release()


class Ple4NvFp4Tiers:
    """A rank's rows of the NVFP4 table: rows [0, vram_rows) in ``vram`` (device memory), the
    rest in ``host`` (pinned host memory). Built whole or not at all."""

    def __init__(self, rows: int, row_bytes: int, vram_rows: int, *, device, pin: bool, what: str) -> None:
        if not 0 <= vram_rows <= rows:
            raise ValueError(f"vram_rows must be within 0..{rows}, got {vram_rows}")
        self.rows = rows
        self.row_bytes = row_bytes
        self.vram_rows = vram_rows
        self.host = Ple4PinnedHostRows(rows - vram_rows, row_bytes, pin=pin, what=what)
        try:
            self.vram = torch.empty((vram_rows, row_bytes), dtype=torch.uint8, device=device)
        except BaseException:
            self.host.release()
            raise

    @property
    def host_rows(self) -> int:
        return self.rows - self.vram_rows

    def copy_rows(self, first: int, source: torch.Tensor, columns: slice) -> None:
        """Write ``source`` (uint8 [k, columns]) into rows first..first+k-1, in either tier."""
        end = first + source.shape[0]
        split = self.vram_rows
        if first < split:
            hi = min(end, split)
            self.vram[first:hi, columns].copy_(source[: hi - first])
        if end > split:
            lo = max(first, split)
            self.host.tensor[lo - split : end - split, columns].copy_(source[lo - first :])

    def zero_from(self, first: int) -> None:
        """Zero rows first.. (vocabulary padding reads as zeros)."""
        split = self.vram_rows
        if first < split:
            self.vram[first:].zero_()
        self.host.tensor[max(0, first - split) :].zero_()

    def release(self) -> None:
        self.vram = None
        self.host.release()

"""The NVFP4 table's two tiers: placement arithmetic, exact pinned host rows and their release,
and the gather over a table split between device memory and pinned host memory.

Without CUDA the registration is stubbed (cudaHostRegister / cudaHostUnregister record their
calls) and the gather runs under the Triton interpreter; the tests marked ``gpu`` pin for real,
read both tiers from the GPU (plain launch and CUDA-graph replay) and release.
"""

import ast
import gc
import mmap
import weakref
from pathlib import Path

import pytest

from kernel_env import DEV, HAS_CUDA, torch  # noqa: E402  (before the kernels: torch, Triton, the interpreter)
from ple4patch.kernels import nvfp4, nvfp4_host  # noqa: E402

DIM = 160
WIDTH = DIM // 2 + DIM // 16
PAGE = mmap.PAGESIZE
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
SRC = Path(nvfp4_host.__file__)


# -- placement ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, budget, expected",
    [
        (1000, None, (0, 1000)),  # no budget in the release: every row on the host
        (1000, 0, (1000, 0)),  # budget 0: every row in VRAM
        (1000, 90 * 1000, (0, 1000)),  # exactly the table
        (1000, 90 * 1000 + 89, (0, 1000)),
        (1000, 90 * 10**9, (0, 1000)),  # more than the table
        (1000, 90 * 400, (600, 400)),
        (1000, 90 * 400 + 89, (600, 400)),  # a partial row stays in VRAM
        (1000, 89, (1000, 0)),
        (0, 90, (0, 0)),
    ],
)
def test_plan_placement(rows, budget, expected):
    assert nvfp4_host.ple4_plan_placement(rows, WIDTH, budget) == expected


def test_plan_placement_of_the_real_tp4_share():
    # 80,000,384 rows of 90 B with an 8 GiB budget (int(8 * 2**30)): all on the host; 4 GiB: part.
    rows = 80_000_384
    assert nvfp4_host.ple4_plan_placement(rows, 90, 8 * 2**30) == (0, rows)
    vram, host = nvfp4_host.ple4_plan_placement(rows, 90, 4 * 2**30)
    assert host == 4 * 2**30 // 90 == 47_721_858 and vram == rows - host


@pytest.mark.parametrize("rows, row_bytes, budget", [(-1, 90, None), (10, 0, None), (10, 90, -1)])
def test_plan_placement_refuses_bad_input(rows, row_bytes, budget):
    with pytest.raises(ValueError, match="non-negative|positive"):
        nvfp4_host.ple4_plan_placement(rows, row_bytes, budget)


# -- exact pinned host rows (registration stubbed) ----------------------------------------------


class FakeCudart:
    """Records cudaHostRegister / cudaHostUnregister, and whether the mapping was still there then
    (mappings are held weakly: a dead one has been unmapped)."""

    def __init__(self, monkeypatch, fail_register=False):
        self.calls = []
        self.fail_register = fail_register
        self.mappings = []
        real_mmap = mmap.mmap

        def recording_mmap(*args, **kwargs):
            m = real_mmap(*args, **kwargs)
            self.mappings.append(weakref.ref(m))
            return m

        monkeypatch.setattr(mmap, "mmap", recording_mmap)
        monkeypatch.setattr(nvfp4_host, "_ple4_cuda_host_register", self.register)
        monkeypatch.setattr(nvfp4_host, "_ple4_cuda_host_unregister", self.unregister)

    def mapped(self, i=-1):
        gc.collect()
        m = self.mappings[i]()
        return m is not None and not m.closed

    def register(self, ptr, nbytes):
        self.calls.append(("register", ptr, nbytes, self.mapped()))
        if self.fail_register:
            raise RuntimeError("cudaHostRegister returned cudaErrorMemoryAllocation")

    def unregister(self, ptr):
        self.calls.append(("unregister", ptr, None, self.mapped()))


@pytest.mark.parametrize("rows", [1, 45, 46, 1000, 12345])
def test_host_rows_map_and_pin_exactly_the_bytes_asked_for(monkeypatch, rows):
    cudart = FakeCudart(monkeypatch)
    host = nvfp4_host.Ple4PinnedHostRows(rows, WIDTH, pin=True)
    nbytes = rows * WIDTH
    assert host.nbytes == nbytes and host.mapped_bytes == -(-nbytes // PAGE) * PAGE
    assert host.mapped_bytes - nbytes < PAGE
    assert len(cudart.mappings) == 1 and len(cudart.mappings[0]()) == host.mapped_bytes
    assert host.tensor.shape == (rows, WIDTH) and host.tensor.dtype == torch.uint8
    assert host.tensor.data_ptr() % PAGE == 0 and not host.tensor.any()
    assert cudart.calls == [("register", host.tensor.data_ptr(), host.mapped_bytes, True)]
    assert host.pinned
    host.tensor[-1, -1] = 7  # the rows are the mapping's bytes
    assert cudart.mappings[0]()[nbytes - 1] == 7


def test_release_unregisters_then_unmaps_once(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    host = nvfp4_host.Ple4PinnedHostRows(1000, WIDTH, pin=True)
    ptr = host.tensor.data_ptr()
    host.release()
    assert cudart.calls[1] == ("unregister", ptr, None, True)  # still mapped when unregistered
    assert not cudart.mapped() and host.tensor is None and not host.pinned  # then unmapped
    host.release()
    assert len(cudart.calls) == 2


def test_collecting_the_rows_releases_them(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    host = nvfp4_host.Ple4PinnedHostRows(100, WIDTH, pin=True)
    ptr = host.tensor.data_ptr()
    del host
    gc.collect()
    assert cudart.calls[1:] == [("unregister", ptr, None, True)] and not cudart.mapped()


def test_a_tensor_still_over_the_rows_keeps_the_mapping_until_it_goes(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    host = nvfp4_host.Ple4PinnedHostRows(100, WIDTH, pin=True)
    kept = host.tensor[3:5]
    host.release()
    assert cudart.calls[-1][0] == "unregister" and cudart.mapped()
    kept[0, 0] = 1  # still valid host memory
    del kept
    assert not cudart.mapped()


def test_a_failed_registration_unmaps_and_says_what_was_asked_and_what_to_do(monkeypatch):
    cudart = FakeCudart(monkeypatch, fail_register=True)
    with pytest.raises(RuntimeError) as err:
        nvfp4_host.Ple4PinnedHostRows(1000, WIDTH, pin=True, what="NVFP4 PLE table x")
    text = str(err.value)
    assert "NVFP4 PLE table x" in text and "90000 bytes" in text and "cudaErrorMemoryAllocation" in text
    assert "MemAvailable" in text and "VLLM_QWEN4EXP_PLE_HOST_GIB" in text and "ulimit -l" in text
    assert not cudart.mapped()
    assert [c[0] for c in cudart.calls] == ["register"]  # nothing registered, nothing to undo


def test_more_than_the_host_has_available_is_refused_before_allocating(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    monkeypatch.setattr(nvfp4_host, "_ple4_meminfo_bytes", lambda key: 3 * 2**30 if key == "MemAvailable" else None)
    with pytest.raises(RuntimeError, match=r"could not pin 7200034560 bytes \(6\.71 GiB\).*3\.00 GiB available \(MemAvailable\)"):
        nvfp4_host.Ple4PinnedHostRows(80_000_384, 90, pin=True)
    assert cudart.mappings == [] and cudart.calls == []


def test_unpinned_rows_are_not_registered(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    host = nvfp4_host.Ple4PinnedHostRows(10, WIDTH, pin=False)
    assert not host.pinned and cudart.calls == []
    host.release()
    assert cudart.calls == [] and not cudart.mapped()


def test_zero_rows_allocate_nothing(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    host = nvfp4_host.Ple4PinnedHostRows(0, WIDTH, pin=True)
    assert host.tensor.shape == (0, WIDTH) and host.mapped_bytes == 0
    host.release()
    assert cudart.mappings == [] and cudart.calls == []


# -- both tiers ------------------------------------------------------------------------------------


def test_tiers_split_rows_and_copies_across_the_boundary(monkeypatch):
    FakeCudart(monkeypatch)
    tiers = nvfp4_host.Ple4NvFp4Tiers(10, 4, 6, device="cpu", pin=True, what="t")
    assert tiers.vram.shape == (6, 4) and tiers.host.tensor.shape == (4, 4) and tiers.host_rows == 4
    tiers.zero_from(0)  # VRAM rows start unset (torch.empty), host rows as zeros
    src = torch.arange(5 * 3, dtype=torch.uint8).reshape(5, 3)
    tiers.copy_rows(4, src, slice(1, 4))  # rows 4..8, columns 1..3
    whole = torch.cat([tiers.vram, tiers.host.tensor])
    assert torch.equal(whole[4:9, 1:], src) and not whole[:4].any() and not whole[9].any()
    assert not whole[:, 0].any()
    whole_before = torch.cat([tiers.vram, tiers.host.tensor]).clone()
    tiers.zero_from(5)
    after = torch.cat([tiers.vram, tiers.host.tensor])
    assert torch.equal(after[:5], whole_before[:5]) and not after[5:].any()


def test_a_failed_vram_allocation_releases_the_pinned_host_tier(monkeypatch):
    cudart = FakeCudart(monkeypatch)
    real_empty = torch.empty

    def empty(*args, **kwargs):
        if kwargs.get("device") == "full-vram":
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", empty)
    with pytest.raises(torch.OutOfMemoryError):
        nvfp4_host.Ple4NvFp4Tiers(100, WIDTH, 40, device="full-vram", pin=True, what="t")
    assert [c[0] for c in cudart.calls] == ["register", "unregister"] and not cudart.mapped()


# -- the gather over two tiers -----------------------------------------------------------------


def _split(table, vram_rows, device):
    return table[:vram_rows].clone().to(device), table[vram_rows:].clone()


def _host_for(device_kind, t):
    return t.pin_memory() if device_kind == "cuda" else t


@pytest.mark.interpreter
@pytest.mark.parametrize("launches", [1, 2])
@pytest.mark.parametrize("vram_rows", [0, 1, 37, 99, 100])
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gather_over_two_tiers_matches_the_reference(launches, vram_rows, out_dtype):
    gen = torch.Generator().manual_seed(vram_rows)
    table = torch.randint(0, 256, (100, WIDTH), generator=gen, dtype=torch.uint8)
    vram, host = _split(table, vram_rows, DEV)
    ids = torch.randint(0, 100, (64,), generator=gen)
    ids[:4] = torch.tensor([0, 99, max(vram_rows - 1, 0), min(vram_rows, 99)])
    gs = torch.tensor([1.7316e-4], dtype=torch.float32, device=DEV)
    out = nvfp4.gather(_host_for(DEV, host), ids.to(DEV), gs, DIM, out_dtype, device_table=vram, launches=launches)
    ref = nvfp4.dequant_reference(table[ids], 1.7316e-4, DIM, out_dtype)
    bits = torch.int32 if out_dtype == torch.float32 else torch.int16
    assert torch.equal(out.cpu().view(bits), ref.view(bits))


@pytest.mark.interpreter
def test_gather_over_two_tiers_covers_the_whole_code_space():
    fcs = nvfp4.full_code_space_table(DIM)
    vram, host = _split(fcs, fcs.shape[0] // 2, DEV)
    ids = torch.arange(fcs.shape[0]).flip(0)
    gs = torch.tensor([1.0], device=DEV)
    for launches in (1, 2):
        out = nvfp4.gather(_host_for(DEV, host), ids.to(DEV), gs, DIM, device_table=vram, launches=launches)
        assert torch.equal(out.cpu().view(torch.int16), nvfp4.dequant_reference(fcs[ids], 1.0, DIM).view(torch.int16))


def test_gather_checks_the_second_tier():
    table = torch.zeros(4, WIDTH, dtype=torch.uint8)
    ids = torch.zeros(2, dtype=torch.int64)
    gs = torch.ones(1)
    with pytest.raises(ValueError, match="device_table: expected 90 bytes a row"):
        nvfp4.gather(table, ids, gs, DIM, device_table=torch.zeros(4, 91, dtype=torch.uint8))
    with pytest.raises(TypeError, match="device_table: expected dtype torch.uint8"):
        nvfp4.gather(table, ids, gs, DIM, device_table=torch.zeros(4, WIDTH))
    with pytest.raises(ValueError, match="launches: expected 1 or 2"):
        nvfp4.gather(table, ids, gs, DIM, device_table=table, launches=3)
    with pytest.raises(ValueError, match="device_table: expected unit column stride"):
        nvfp4.gather(table, ids, gs, DIM, device_table=torch.zeros(WIDTH, 4, dtype=torch.uint8).t())


# -- the module obeys the injection rules ------------------------------------------------------


def test_host_module_imports_only_stdlib_and_torch_and_prefixes_its_names():
    tree = ast.parse(SRC.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Import):
            assert all(a.name in ("mmap", "weakref", "torch") for a in node.names), ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            pytest.fail(f"line {node.lineno}: from-import {ast.unparse(node)}")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assert node.name.startswith(("_ple4_", "ple4_", "Ple4")), node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assert all(t.id.startswith(("_ple4_", "ple4_", "Ple4")) for t in targets)
        else:
            assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant), f"line {node.lineno}"


# -- on the GPU: real pinning, both tiers, graph replay, release ---------------------------------


def _meminfo(key):
    return nvfp4_host._ple4_meminfo_bytes(key)


@gpu
@needs_cuda
def test_gpu_host_rows_are_pinned_uva_mapped_and_released():
    rows = (256 << 20) // WIDTH + 1  # a little over 256 MiB
    host = nvfp4_host.Ple4PinnedHostRows(rows, WIDTH, pin=True)
    assert host.pinned and host.tensor.is_pinned() and host.mapped_bytes == -(-rows * WIDTH // PAGE) * PAGE
    host.tensor[-1].fill_(0x3C)
    class _View:  # a CUDA tensor over the host rows (UVA), as the engine's view is
        __cuda_array_interface__ = {
            "shape": tuple(host.tensor.shape), "typestr": "|u1",
            "data": (host.tensor.data_ptr(), False), "version": 3,
        }

    view = torch.as_tensor(_View(), device="cuda")
    assert view.data_ptr() == host.tensor.data_ptr()
    assert torch.equal(view[-1].cpu(), host.tensor[-1])
    mapping = host._mapping
    del view
    host.release()
    # Unregistered (cudaHostUnregister returned success, or release raised) and unmapped.
    assert not mapping.registered and mapping.mapping is None and host.tensor is None
    torch.cuda.synchronize()


def _tiers_on_gpu(rows, vram_rows, seed):
    table = torch.randint(0, 256, (rows, WIDTH), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    tiers = nvfp4_host.Ple4NvFp4Tiers(rows, WIDTH, vram_rows, device="cuda", pin=True, what="gpu test")
    tiers.copy_rows(0, table, slice(0, WIDTH))
    return table, tiers


@gpu
@needs_cuda
@pytest.mark.parametrize("launches", [1, 2])
@pytest.mark.parametrize("vram_rows", [0, 1, 50_000, 99_999, 100_000])
def test_gpu_gather_reads_both_tiers_bit_exact(launches, vram_rows):
    table, tiers = _tiers_on_gpu(100_000, vram_rows, 11)
    assert tiers.host.tensor.is_pinned() or tiers.host_rows == 0
    ids = torch.randint(0, 100_000, (4096,))
    ids[:4] = torch.tensor([0, 99_999, max(vram_rows - 1, 0), min(vram_rows, 99_999)])
    gs = torch.tensor([1.7316e-4], device="cuda")
    out = nvfp4.gather(tiers.host.tensor, ids.cuda(), gs, DIM, device_table=tiers.vram, launches=launches)
    ref = nvfp4.dequant_reference(table[ids], 1.7316e-4, DIM)
    assert torch.equal(out.cpu().view(torch.int16), ref.view(torch.int16))
    tiers.release()


@gpu
@needs_cuda
@pytest.mark.parametrize("launches", [1, 2])
def test_gpu_gather_over_two_tiers_replays_in_a_cuda_graph(launches):
    table, tiers = _tiers_on_gpu(200_000, 120_000, 12)
    gs = torch.tensor([0.5], device="cuda")
    static_ids = torch.zeros(640, dtype=torch.int64, device="cuda")
    out = torch.empty(640, DIM, dtype=torch.float16, device="cuda")

    def run():
        from ple4patch.kernels.nvfp4_gather import ple4_nvfp4_gather

        ple4_nvfp4_gather(tiers.host.tensor, static_ids, gs, DIM, torch.float16, out=out,
                          device_table=tiers.vram, launches=launches)

    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for seed in (1, 2, 3):
        ids = torch.randint(0, 200_000, (640,), generator=torch.Generator().manual_seed(seed))
        static_ids.copy_(ids.cuda())
        graph.replay()
        torch.cuda.synchronize()
        ref = nvfp4.dequant_reference(table[ids], 0.5, DIM)
        assert torch.equal(out.cpu().view(torch.int16), ref.view(torch.int16))
    del graph
    tiers.release()


@gpu
@needs_cuda
def test_gpu_release_gives_the_pinned_memory_back():
    rows = (1 << 30) // WIDTH  # 1 GiB
    before = _meminfo("MemAvailable")
    host = nvfp4_host.Ple4PinnedHostRows(rows, WIDTH, pin=True)
    during = _meminfo("MemAvailable")
    host.release()
    gc.collect()
    after = _meminfo("MemAvailable")
    assert before - during > 0.9 * 2**30  # the pages are locked (resident) while registered
    assert after - during > 0.9 * 2**30  # and back once released

"""End to end: the NVFP4 table honours the engine release's pinned-host budget.

Patched real ple_layer.py files against the stand-in `vllm`. Which releases define a budget is
read from the files themselves: 1CatAI/1Cat-vLLM main at 036318a0 defines
``_ple_host_budget_bytes`` in ple_layer.py, main at 15a8d185 imports ``ple_host_budget_bytes``
from ..common.ple (both read VLLM_QWEN4EXP_PLE_HOST_GIB, and derive a fair share of host memory
when it is unset); the fork at a223f046 (the 1.5.0-era shape) has none, so the whole share stays
in host memory there. Lookups must equal the reference bit for bit on both tiers.
"""

from __future__ import annotations

import gc
import logging

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import harness as h  # noqa: E402  (sets TRITON_INTERPRET=1 without CUDA)
from test_e2e_nvfp4 import DEVICE, ENGINES, G, bits, build_loaded, engine_dir, load_engine, reference  # noqa: E402,F401

ROW = G.head_dim // 2 + G.head_dim // 16
# What each real release defines (from the files; see the module docstring).
HAS_BUDGET = {
    "1cat-vllm-fork-a223f046": False,
    "1cat-vllm-main-036318a0": True,
    "1cat-vllm-main-15a8d185": True,
}
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not h.HAS_CUDA, reason="needs a CUDA GPU")
REAL = [p for p in ENGINES if p.values[0] and p.values[0][0] in HAS_BUDGET]
if not REAL:
    REAL = [pytest.param(None, marks=pytest.mark.skip(reason="../shared/engines is absent"), id="no-shared")]


@pytest.fixture(params=REAL)
def release(request, engine_dir):
    tag = request.param[0]
    return tag, HAS_BUDGET[tag], load_engine(request.param, engine_dir)


@pytest.fixture(autouse=True)
def _no_budget_variables(monkeypatch):
    for name in ("VLLM_QWEN4EXP_PLE_HOST_GIB", "VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB"):
        monkeypatch.delenv(name, raising=False)


def _budget_gib(rows: int) -> str:
    # The engine's unit: int(GiB * 2**30) bytes; a little over rows * ROW so rounding keeps rows.
    return repr((rows * ROW + 0.5) / 2**30)


def _check_lookups(emb, table, vram_rows):
    ids = torch.randint(0, emb.org_vocab_size, (10, G.ngram_heads), generator=torch.Generator().manual_seed(3))
    edge = [0, emb.org_vocab_size - 1, max(vram_rows - 1, 0), min(vram_rows, emb.org_vocab_size - 1)]
    ids[0, : len(edge)] = torch.tensor(edge[: G.ngram_heads])
    ids[1, : len(edge) - G.ngram_heads] = torch.tensor(edge[G.ngram_heads :])
    out = emb(ids.to(DEVICE))
    assert torch.equal(bits(out), bits(reference(table, ids)))


@pytest.mark.interpreter
@pytest.mark.parametrize("layout", ["rowpacked", "split"])
def test_configured_budget_splits_the_table(release, monkeypatch, caplog, layout):
    tag, has_budget, module = release
    host_rows = 123
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_HOST_GIB", _budget_gib(host_rows))
    with caplog.at_level(logging.INFO):
        model, table, _, _ = build_loaded(module, layout=layout)
    emb = model.ngram_embedding
    rows = emb.num_embeddings_per_partition
    if has_budget:
        assert emb.ple4_vram_rows == rows - host_rows
        assert emb.ple4_table.shape == (host_rows, ROW) and emb.ple4_vram_table.shape == (rows - host_rows, ROW)
        assert emb.ple4_vram_table.device.type == DEVICE
        assert f"placement: {rows - host_rows} of {rows} rows in device memory" in caplog.text
        assert "VLLM_QWEN4EXP_PLE_HOST_GIB" in caplog.text
    else:  # the release has no budget: the variable means nothing to it
        assert emb.ple4_vram_rows == 0 and emb.ple4_table.shape == (rows, ROW)
        assert f"placement: 0 of {rows} rows in device memory" in caplog.text
        assert "has no PLE host budget" in caplog.text
    _check_lookups(emb, table, emb.ple4_vram_rows)


@pytest.mark.interpreter
def test_budget_zero_puts_the_whole_table_in_vram(release, monkeypatch):
    tag, has_budget, module = release
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_HOST_GIB", "0")
    model, table, _, _ = build_loaded(module, layout="split")
    emb = model.ngram_embedding
    rows = emb.num_embeddings_per_partition
    assert emb.ple4_vram_rows == (rows if has_budget else 0)
    assert emb.ple4_table.shape[0] == (0 if has_budget else rows)
    _check_lookups(emb, table, emb.ple4_vram_rows)


@pytest.mark.interpreter
def test_unset_budget_is_the_fair_share_of_host_memory(release, monkeypatch):
    """As the release derives it: max(0, MemAvailable - reserve) // ranks sharing the host,
    reserve = MemTotal // 4 unless VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB is set."""
    tag, has_budget, module = release
    from vllm.config import VllmConfig, set_current_vllm_config
    from types import SimpleNamespace

    ranks, total = 2, 4000 * ROW
    available = total // 4 + ranks * 200 * ROW + ranks * 7  # a share of 200 rows and 7 bytes
    for name, value in (("available_host_bytes", lambda: available), ("total_host_bytes", lambda: total)):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)
    parallel = SimpleNamespace(tensor_parallel_size=ranks, local_world_size=8, data_parallel_size_local=1)
    with set_current_vllm_config(VllmConfig(parallel_config=parallel)):
        model, table, _, _ = build_loaded(module)
    emb = model.ngram_embedding
    rows = emb.num_embeddings_per_partition
    assert emb.ple4_vram_rows == (rows - 200 if has_budget else 0)
    _check_lookups(emb, table, emb.ple4_vram_rows)
    # The reserve variable moves the share: with no reserve, available // ranks.
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB", "0")
    with set_current_vllm_config(VllmConfig(parallel_config=parallel)):
        model2, _, _, _ = build_loaded(module, seed=2)
    emb2 = model2.ngram_embedding
    assert emb2.ple4_table.shape[0] == (min(rows, available // ranks // ROW) if has_budget else rows)


@pytest.mark.interpreter
def test_a_bad_budget_variable_is_refused_by_the_release(release, monkeypatch):
    tag, has_budget, module = release
    if not has_budget:
        pytest.skip("the release has no budget variable")
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_HOST_GIB", "-1")
    with pytest.raises(ValueError, match="VLLM_QWEN4EXP_PLE_HOST_GIB must be finite and non-negative"):
        build_loaded(module)


def test_release_and_destruction_give_the_table_back(release):
    tag, has_budget, module = release
    model, table, _, _ = build_loaded(module)
    emb = model.ngram_embedding
    name = emb.layer_name
    registry = module._ple4_layers
    assert registry[name] is emb
    emb.ple4_release()
    assert emb.ple4_table is None and emb.ple4_vram_table is None and emb._ple4_tiers is None
    with pytest.raises(RuntimeError, match="before its weights were loaded"):
        emb(torch.zeros(1, 1, dtype=torch.long, device=DEVICE))
    emb.ple4_release()  # idempotent
    host = build_loaded(module)[0]
    host_rows = host.ngram_embedding._ple4_tiers.host
    finalizer = host_rows._finalizer
    del host, host_rows, model, emb
    gc.collect()
    assert not finalizer.alive  # the host tier was released with its layer
    assert name not in registry


@gpu
@needs_cuda
@pytest.mark.parametrize("host_rows", [0, 123])
def test_gpu_both_tiers_bit_exact_plain_and_in_a_cuda_graph(release, monkeypatch, host_rows):
    tag, has_budget, module = release
    if not has_budget:
        pytest.skip("the release has no budget")
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_HOST_GIB", _budget_gib(host_rows))
    model, table, _, _ = build_loaded(module, layout="split")
    emb = model.ngram_embedding
    assert emb.ple4_vram_table.is_cuda and emb.ple4_vram_rows == emb.num_embeddings_per_partition - host_rows
    if host_rows:
        assert emb.ple4_table.is_pinned()
    _check_lookups(emb, table, emb.ple4_vram_rows)
    static_ids = torch.zeros(32, G.ngram_heads, dtype=torch.long, device="cuda")
    emb(static_ids)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = emb(static_ids)
    for seed in (1, 2):
        ids = torch.randint(0, emb.org_vocab_size, (32, G.ngram_heads), generator=torch.Generator().manual_seed(seed))
        static_ids.copy_(ids.cuda())
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(bits(static_out), bits(reference(table, ids)))

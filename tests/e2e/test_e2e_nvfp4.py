"""End to end: patched ple_layer.py files (the real ones and the stand-in) serve NVFP4 lookups.

Each engine file is patched with ple4patch.transform.patch_source and imported against the
stand-in `vllm` (tests/e2e/standin_vllm). Qwen4ExpNGramEmbedding is built for a small config
with ple_embedding_dtype "nvfp4_rowpacked", checkpoint shards go through the file's real
load_weights in both layouts (global scale both ways), and lookups through the registered
custom op and the Triton gather must equal ple4patch.kernels.nvfp4.dequant_reference bit for
bit. Without CUDA the gather runs under the Triton interpreter (tables are kept small); with
CUDA the same tests run compiled, and the `gpu` tests add pinned memory, the UVA view and a
CUDA-graph replay.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tools import engine_corpus  # noqa: E402
from tools import engine_files  # noqa: E402
import harness as h  # noqa: E402  (sets TRITON_INTERPRET=1 without CUDA)
from ple4patch.kernels.nvfp4 import dequant_reference  # noqa: E402
from ple4patch.errors import TransformError  # noqa: E402
from ple4patch.transform import patch_source  # noqa: E402

DEVICE = "cuda" if h.HAS_CUDA else "cpu"
G = h.Geometry()
SCALE = 0.0123
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not h.HAS_CUDA, reason="needs a CUDA GPU")


def _engine_sources() -> list:
    params = []
    standin = engine_files.standin_file()
    if standin is not None:
        params.append(pytest.param(("standin", standin), id="standin"))
    rows = engine_files.shared_engines()
    if not rows:
        params.append(pytest.param(None, marks=pytest.mark.skip(reason="../shared/engines is absent"), id="no-shared"))
    for row in rows:
        params.append(pytest.param((row.folder, row.path), id=row.folder))
    # The real files stored in tests/data/engines that the transform patches (the refused ones
    # are checked in tests/test_transform_shapes.py).
    for row in engine_corpus.corpus_files("ple_layer.py"):
        try:
            patch_source(engine_corpus.check(row).decode("utf-8"))
        except TransformError:
            continue
        params.append(pytest.param((row.label, row.path), id=row.label))
    return params


ENGINES = _engine_sources()
_modules: dict[tuple[str, bool], object] = {}


@pytest.fixture(scope="session")
def engine_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("engines")


def load_engine(source, directory: Path, *, patched: bool = True):
    """The (patched) engine file as a module, imported once per session; its ops made active."""
    tag, path = source
    key = (tag, patched)
    if key not in _modules:
        text = path.read_text(encoding="utf-8")
        if patched:
            text = patch_source(text)
        ident = tag.replace("-", "_") + ("" if patched else "_orig")
        _modules[key] = h.import_engine_file(text, directory, ident)
    module = _modules[key]
    from vllm.utils import torch_utils

    torch_utils.activate(module)
    return module


@pytest.fixture(params=ENGINES)
def engine(request, engine_dir):
    return load_engine(request.param, engine_dir)


@pytest.fixture
def standin_engine(engine_dir):
    return load_engine(ENGINES[0].values[0], engine_dir)


@pytest.fixture
def engine_15a8(engine_dir):
    for param in ENGINES:
        if param.values[0] and param.values[0][0] == "1cat-vllm-main-15a8d185":
            return load_engine(param.values[0], engine_dir)
    pytest.skip("../shared/engines/1cat-vllm-main-15a8d185 is absent")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE"):
        monkeypatch.delenv(name, raising=False)


def build_loaded(module, *, layout="rowpacked", per_shard=False, seed=1, geometry=G, scales_as_e4m3=True):
    """The module's NVFP4 embedding inside the stand-in Qwen4ExpForConditionalGeneration, loaded
    from a synthetic HF checkpoint through the model-level name path."""
    top = h.build_model(module, h.make_config(geometry), geometry)
    model = h.model_embedding(top)
    emb = model.ngram_embedding
    table = h.random_table(emb.org_vocab_size, geometry.head_dim, seed)
    tensors = h.checkpoint(table, geometry.split_ngram_parts, geometry.head_dim, layout=layout,
                           global_scale=SCALE, scale_per_shard=per_shard, scales_as_e4m3=scales_as_e4m3)
    buffers = h.buffers_of(model)
    with h.current_or_engine_config():
        loaded_full = top.load_weights(iter(h.hf_checkpoint(tensors + buffers)))
        h.finish_loading(top)
    inner = "language_model.model.layers.1.ple.ple_embedding."
    assert {"language_model.lm_head.weight", "language_model.model.layers.0.input_layernorm.weight"} <= loaded_full
    assert not any("mtp" in name for name in loaded_full)  # the engine skips the MTP tensors
    loaded = {name[len(inner):] for name in loaded_full if name.startswith(inner)}
    for name, value in buffers:  # the stock loader got every non-table weight
        assert name in loaded and torch.equal(getattr(model, name), value), name
    return model, table, loaded, tensors


def reference(table: torch.Tensor, ids: torch.Tensor, dim: int = G.head_dim) -> torch.Tensor:
    flat = ids.reshape(-1).cpu()
    return dequant_reference(table[flat], torch.tensor([SCALE]), dim).reshape(*ids.shape, dim)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.cpu().view(torch.int16)


# -- lookups ---------------------------------------------------------------------------------


@pytest.mark.interpreter
@pytest.mark.parametrize("layout", ["rowpacked", "split"])
@pytest.mark.parametrize("per_shard", [False, True], ids=["global-scale", "per-shard-scale"])
def test_lookup_matches_reference(engine, layout, per_shard):
    model, table, loaded, tensors = build_loaded(engine, layout=layout, per_shard=per_shard)
    emb = model.ngram_embedding
    assert type(emb).__name__ == "Ple4NvFp4PinnedEmbedding"
    assert emb.ple4_table.shape == (emb.num_embeddings_per_partition, G.head_dim // 2 + G.head_dim // 16)
    assert {name for name, _ in tensors} <= loaded
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, emb.org_vocab_size, (12, G.ngram_heads), generator=gen)
    ids[0, 0], ids[-1, -1] = 0, emb.org_vocab_size - 1  # first and last rows
    out = emb(ids.to(DEVICE))
    assert out.dtype == torch.float16 and out.shape == (12, G.ngram_heads, G.head_dim)
    assert torch.equal(bits(out), bits(reference(table, ids)))


@pytest.mark.interpreter
def test_tensor_parallel_rank_keeps_only_its_rows(standin_engine):
    with h.knobs(tp_rank=2, tp_size=4):
        model, table, _, _ = build_loaded(standin_engine, layout="split")
        emb = model.ngram_embedding
        start = emb.shard_indices.org_vocab_start_index
        end = emb.shard_indices.org_vocab_end_index
        assert 0 < start < end <= emb.org_vocab_size
        assert emb.ple4_table.shape[0] == emb.num_embeddings_per_partition < emb.org_vocab_size
        ids = torch.tensor([[start, end - 1, 0, emb.org_vocab_size - 1], [start + 5, end, start - 1, start + 1]])
        out = emb(ids.to(DEVICE)).cpu()
        inside = (ids >= start) & (ids < end)
        ref = reference(table, ids)
        assert torch.equal(bits(out[inside]), bits(ref[inside]))
        assert not out[~inside].any()


@pytest.mark.interpreter
def test_weights_arriving_in_several_calls_and_scales_as_uint8(standin_engine):
    model = h.build(standin_engine, h.make_config())
    emb = model.ngram_embedding
    table = h.random_table(emb.org_vocab_size, G.head_dim, 3)
    tensors = h.checkpoint(table, G.split_ngram_parts, G.head_dim, layout="split", global_scale=SCALE,
                           scale_per_shard=True, scales_as_e4m3=False)
    for chunk in (tensors[:2], tensors[2:5], tensors[5:]):
        model.load_weights(iter(chunk))
    h.finish_loading(model)
    ids = torch.arange(0, emb.org_vocab_size, 97).reshape(-1, 1)
    assert torch.equal(bits(emb(ids.to(DEVICE))), bits(reference(table, ids)))


def test_dummy_load_gives_zeros(standin_engine):
    from vllm.config import LoadConfig, VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig(load_config=LoadConfig(load_format="dummy"))):
        model = h.build(standin_engine, h.make_config())
        h.finish_loading(model)
    emb = model.ngram_embedding
    assert emb.ple4_table is not None and not emb.ple4_table.any()


# -- the stock paths of a patched file ------------------------------------------------------------


def _fp8_checkpoint(rows: int, dim: int, parts: int):
    gen = torch.Generator().manual_seed(5)
    table = torch.randint(0, 126, (rows, dim), generator=gen, dtype=torch.uint8).view(torch.float8_e4m3fn)
    size = (rows + parts - 1) // parts
    out = [(f"ngram_embedding.shard_{i}.weight", table[i * size : (i + 1) * size].clone()) for i in range(parts)]
    out.append(("ngram_embedding.weight_scale", torch.tensor([0.5], dtype=torch.float16)))
    return out


def _fp8_quant_config(tag: str):
    """The quantization config under which a release's stock path builds its FP8 PLE table.

    The 1Cat-vLLM releases pick the FP8 method from ``ple_embedding_dtype`` alone (no quant
    config). vllm-project/vllm's ple_layer.py at 020a97c7 (``_get_ple_embedding_quant_method``)
    picks it only under an FP8-serialized Fp8Config, or under a ModelOptNvFp4Config that excludes
    the PLE table when ``ple_embedding_dtype`` is float8_e4m3fn: the latter is how an NVIDIA
    NVFP4 checkpoint with an FP8 PLE table is served there.
    """
    if tag == "fork-vllm-project-020a97c7":
        from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config

        return ModelOptNvFp4Config("NVFP4", True, None, ["*ple_embedding.ngram_embedding"])
    return None


def _fp8_from_the_model_config(module) -> bool:
    # Most versions can store the PLE table as FP8 from the model config (ple_embedding_dtype, or
    # force_fp8_storage derived from it). D-G-Dimitrov/vllm 337d3f5d's
    # _get_ple_embedding_quant_method(quant_config, prefix) takes FP8 only from an FP8-serialized
    # Fp8Config checkpoint, through vllm-project's quantization API (is_layer_skipped(...,
    # match_mode=), Fp8Config.ignored_layers_match_mode), which the 1Cat-vLLM stand-in does not have.
    params = inspect.signature(module._get_ple_embedding_quant_method).parameters
    return "ple_embedding_dtype" in params or "force_fp8_storage" in params


def test_fp8_path_of_a_patched_file_is_unchanged(request, engine, engine_dir):
    source = request.node.callspec.params["engine"]
    if not _fp8_from_the_model_config(engine):
        pytest.skip("FP8 PLE storage only from an Fp8Config checkpoint of vllm-project's quantization "
                    "API; the stock path is checked by test_row_shard_table_of_a_patched_file_loads_as_before")
    original = load_engine(source, engine_dir, patched=False)
    load_engine(source, engine_dir)  # re-activate the patched module's ops
    config = h.make_config(ple_embedding_dtype="float8_e4m3fn")
    models = []
    for module in (original, engine):
        model = h.build(module, config, quant_config=_fp8_quant_config(source[0]))
        weights = _fp8_checkpoint(model.ngram_embedding.org_vocab_size, G.head_dim, G.split_ngram_parts)
        loaded = model.load_weights(iter(weights + h.buffers_of(model)))
        models.append((model, loaded))
    (a, loaded_a), (b, loaded_b) = models
    assert type(a.ngram_embedding).__name__ == type(b.ngram_embedding).__name__
    assert type(b.ngram_embedding.quant_method).__name__ != "Ple4NvFp4EmbeddingMethod"
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert pa.keys() == pb.keys() and loaded_a == loaded_b
    for name in pa:
        assert pa[name].dtype == pb[name].dtype and torch.equal(pa[name].view(torch.uint8), pb[name].view(torch.uint8))


# The versions whose stock table is PLEVocabParallelEmbedding of ..common.ple (a plain assignment
# the wrap keeps as its else branch), e.g. D-G-Dimitrov/vllm 337d3f5d.
ROW_SHARD_ENGINES = [
    p for p in ENGINES
    if p.values[0] and "self.ngram_embedding = PLEVocabParallelEmbedding(" in p.values[0][1].read_text(encoding="utf-8")
] or [pytest.param(None, marks=pytest.mark.skip(reason="no engine file here builds PLEVocabParallelEmbedding"), id="none")]


@pytest.mark.parametrize("source", ROW_SHARD_ENGINES)
def test_row_shard_table_of_a_patched_file_loads_as_before(source, engine_dir):
    """Without NVFP4 the patched file builds and loads the engine's row-shard table as the
    original does: every checkpoint shard through its weight_loader(checkpoint_start=), this
    rank keeping only its rows."""
    original = load_engine(source, engine_dir, patched=False)
    patched = load_engine(source, engine_dir)
    config = h.make_config(ple_embedding_dtype=None)
    table = None
    results = []
    with h.knobs(tp_rank=1, tp_size=2):
        for module in (original, patched):
            model = h.build(module, config)
            emb = model.ngram_embedding
            assert type(emb).__name__ == "PLEVocabParallelEmbedding"
            if table is None:
                gen = torch.Generator().manual_seed(11)
                table = torch.randn(emb.org_vocab_size, G.head_dim, generator=gen).to(torch.float16)
            size = (emb.org_vocab_size + G.split_ngram_parts - 1) // G.split_ngram_parts
            shards = [(f"ngram_embedding.shard_{i}.weight", table[i * size : (i + 1) * size].clone())
                      for i in range(G.split_ngram_parts)]
            loaded = model.load_weights(iter(shards + h.buffers_of(model)))
            start, end = emb.shard_indices.org_vocab_start_index, emb.shard_indices.org_vocab_end_index
            assert 0 < start < end == emb.org_vocab_size  # rank 1 of 2: the upper half only
            assert torch.equal(emb.weight[: end - start], table[start:end])
            results.append((loaded, {n: t.clone() for n, t in model.state_dict().items()}))
    (loaded_a, state_a), (loaded_b, state_b) = results
    assert "ngram_embedding.weight" in loaded_a and loaded_a == loaded_b
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[n], state_b[n]) for n in state_a)


def test_offload_gpu_worker_skips_construction_as_before_for_fp8(engine, monkeypatch):
    monkeypatch.setenv("VLLM_PLE_CPU_OFFLOAD", "1")
    model = h.build(engine, h.make_config(ple_embedding_dtype="float8_e4m3fn"))
    assert not hasattr(model, "ngram_embedding")  # the engine's placeholder, as without the patch


# -- refusals ---------------------------------------------------------------------------------------


def test_cpu_offload_is_refused_where_the_engine_skips_the_constructor(engine, monkeypatch):
    monkeypatch.setenv("VLLM_PLE_CPU_OFFLOAD", "1")
    with pytest.raises(RuntimeError, match="VLLM_PLE_CPU_OFFLOAD=0"):
        h.build(engine, h.make_config())


@pytest.mark.parametrize(
    "env, match",
    [
        ({"VLLM_PLE_DISK_OFFLOAD": "1"}, "VLLM_PLE_DISK_OFFLOAD=0"),
        ({"VLLM_SM70_QWEN38_HYBRID_PLE": "1"}, "VLLM_SM70_QWEN38_HYBRID_PLE=0"),
        ({"VLLM_SM70_QWEN38_HYBRID_PLE": "1", "VLLM_PLE_CPU_OFFLOAD": "1"}, "VLLM_PLE_CPU_OFFLOAD=0"),
    ],
    ids=["disk", "hybrid", "hybrid-offload"],
)
def test_other_offload_modes_are_refused(standin_engine, monkeypatch, env, match):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(RuntimeError, match=match):
        h.build(standin_engine, h.make_config())


@pytest.mark.parametrize("field, match", [
    ("cpu", "VLLM_PLE_CPU_OFFLOAD=0"), ("disk", "VLLM_PLE_DISK_OFFLOAD=0"), ("hybrid", "VLLM_SM70_QWEN38_HYBRID_PLE=0"),
])
def test_typed_placement_is_refused_with_no_variable_set(engine, monkeypatch, field, match):
    """Releases with typed PLE placement (offload_config.ple, areslp/1Cat-vLLM 48b2e9a6
    vllm/config/execution_policy.py) keep the start-up policy's choice, or the user's typed one,
    there and not in the environment: the loader reads it through ple_policy()."""
    for name in ("VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE"):
        monkeypatch.delenv(name, raising=False)
    h.standin_vllm()
    from vllm.config import VllmConfig

    config = VllmConfig()
    setattr(config.offload_config.ple, field, True)
    config.offload_config.ple.sources[field] = "typed"
    with h.engine_config(config), pytest.raises(RuntimeError, match=match):
        h.build(engine, h.make_config())


@pytest.mark.parametrize("argv, refused", [
    (["/opt/engine/bin/vllm", "serve", "/models/q38", "--kernel-config", '{"ple_disk_cascade": true}'], True),
    (["/opt/engine/bin/vllm", "serve", "/models/q38", "--kernel.ple_disk_cascade", "yes"], True),
    (["/opt/engine/bin/vllm", "serve", "/models/q38", "--kernel-config", '{"ple_disk_cascade": false}'], False),
    (["/home/me/script.py", "--kernel-config", '{"ple_disk_cascade": true}'], False),
])
def test_the_cascade_forced_on_in_the_command_line_is_refused_in_the_worker(engine, monkeypatch, argv, refused):
    """A release without the start-up policy file (its placement in vllm/config/vllm.py, where that
    module is not patched: a cascade alone is no member of the set) reaches the GPU worker with
    the user's --kernel-config; the worker
    inherits the command line (multiprocessing's spawn sets sys.argv from the parent's), and the
    patched layer refuses it in the policy's own words."""
    monkeypatch.setattr("sys.argv", argv)
    if not refused:
        h.build(engine, h.make_config())
        return
    with pytest.raises(RuntimeError) as err:
        h.build(engine, h.make_config())
    line = str(err.value)
    assert line.startswith("ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but "
                           "--kernel-config ple_disk_cascade=true"), line
    assert "--kernel-config '{\"ple_disk_cascade\": false}'" in line and "\n" not in line


def test_the_command_line_cascade_leaves_an_fp8_table_to_the_engine(engine, monkeypatch):
    """Only an NVFP4 request is judged: an FP8 checkpoint under the same command line builds as
    the stock engine builds it."""
    argv = ["/opt/engine/bin/vllm", "serve", "/m", "--kernel-config", '{"ple_disk_cascade": true}']
    monkeypatch.setattr("sys.argv", argv)
    model = h.build(engine, h.make_config(ple_embedding_dtype="float8_e4m3fn"))
    assert type(model.ngram_embedding).__name__ != "Ple4NvFp4PinnedEmbedding"


def test_offload_process_is_refused(standin_engine):
    with h.knobs(offload_process=True), pytest.raises(RuntimeError, match="VLLM_PLE_CPU_OFFLOAD=0"):
        h.build(standin_engine, h.make_config())


def test_cascade_is_refused_where_the_engine_has_it(engine_15a8):
    # The engine resolves the cascade into KernelConfig.ple_disk_cascade_active
    # (runtime_defaults.py 51c0f972, _qwen4exp_ple_cascade_requested), which both
    # ple_cascade_configured() and ple_offload_enabled() read.
    with h.engine_config(ple_disk_cascade_active=True), pytest.raises(RuntimeError, match="cascade"):
        h.build(engine_15a8, h.make_config())


def test_gguf_is_refused(standin_engine):
    from vllm.model_executor.layers.quantization.gguf import GGUFConfig

    with pytest.raises(RuntimeError, match="GGUF"):
        h.build(standin_engine, h.make_config(), quant_config=GGUFConfig())
    with h.engine_config(ple_pinned_decode_active=True), pytest.raises(RuntimeError, match="GGUF"):
        h.build(standin_engine, h.make_config())


def test_head_dim_not_a_multiple_of_16_is_refused(engine):
    geometry = h.Geometry(head_dim=40)
    with pytest.raises(ValueError, match="multiple of 16"):
        h.build(engine, h.make_config(geometry), geometry)


def test_no_pinned_memory_is_refused(engine):
    with h.knobs(pin_memory_available=False), pytest.raises(RuntimeError, match="pinned"):
        h.build(engine, h.make_config())


def _fresh(module):
    model = h.build(module, h.make_config())
    emb = model.ngram_embedding
    table = h.random_table(emb.org_vocab_size, G.head_dim, 2)
    return model, emb, table


SHARD_ROWS = 704  # ceil(2112 / 3) rows in shard 0 of the default geometry


@pytest.mark.parametrize(
    "tensor, match",
    [
        (lambda t: t[:SHARD_ROWS].to(torch.float16), "expected dtype torch.uint8"),
        (lambda t: t[: SHARD_ROWS - 1], r"expected shape \(704, 18\)"),
        (lambda t: torch.zeros(SHARD_ROWS, 17, dtype=torch.uint8), r"expected shape \(704, 18\)"),
    ],
    ids=["dtype", "rows", "width"],
)
def test_bad_shard_is_refused_before_allocation(standin_engine, tensor, match):
    model, emb, table = _fresh(standin_engine)
    with pytest.raises(ValueError, match="ngram_embedding.shard_0.weight: " + match):
        model.load_weights(iter([("ngram_embedding.shard_0.weight", tensor(table))]))
    assert emb.ple4_table is None  # nothing allocated for a bad first shard


def test_bad_split_scales_and_mixed_layouts_are_refused(standin_engine):
    model, emb, table = _fresh(standin_engine)
    with pytest.raises(ValueError, match="shard_0.weight_scale: expected dtype"):
        model.load_weights(iter([("ngram_embedding.shard_0.weight_scale", table[:SHARD_ROWS, 16:].float())]))
    model.load_weights(iter([("ngram_embedding.shard_0.weight", table[:SHARD_ROWS, :16].clone())]))
    with pytest.raises(ValueError, match="both row-packed and in the split layout"):
        model.load_weights(iter([("ngram_embedding.shard_0.weight", table[:SHARD_ROWS].clone())]))
    with pytest.raises(ValueError, match="outside split_ngram_parts=3"):
        model.load_weights(iter([("ngram_embedding.shard_3.weight", table[:SHARD_ROWS].clone())]))
    with pytest.raises(ValueError, match="unexpected tensor"):
        model.load_weights(iter([("ngram_embedding.shard_0.input_scale", torch.ones(1))]))
    with pytest.raises(ValueError, match="FP8 PLE table"):
        model.load_weights(iter([("ngram_embedding.weight_scale", torch.ones(1))]))


@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -1.0])
def test_bad_global_scale_is_refused(standin_engine, value):
    model, _, _ = _fresh(standin_engine)
    with pytest.raises(ValueError, match="finite and positive"):
        model.load_weights(iter([("ngram_embedding.weight_scale_2", torch.tensor([value]))]))


def test_unequal_or_malformed_global_scales_are_refused(standin_engine):
    model, _, _ = _fresh(standin_engine)
    model.load_weights(iter([("ngram_embedding.shard_0.weight_scale_2", torch.tensor([0.5]))]))
    with pytest.raises(ValueError, match="differs from ngram_embedding.shard_0.weight_scale_2"):
        model.load_weights(iter([("ngram_embedding.shard_1.weight_scale_2", torch.tensor([0.25]))]))
    with pytest.raises(ValueError, match="one FP32 value"):
        model.load_weights(iter([("ngram_embedding.weight_scale_2", torch.tensor([0.5, 0.5]))]))


def test_missing_shards_and_scale_fail_when_loading_ends(standin_engine):
    model, emb, table = _fresh(standin_engine)
    tensors = h.checkpoint(table, 3, G.head_dim, layout="split", global_scale=SCALE, scale_per_shard=False)
    partial = [(n, t) for n, t in tensors if n not in ("ngram_embedding.shard_1.weight_scale", "ngram_embedding.weight_scale_2")]
    model.load_weights(iter(partial))
    with pytest.raises(RuntimeError, match=r"shards 1 of 3 .* and the global scale"):
        h.finish_loading(model)
    model2 = h.build(standin_engine, h.make_config(), prefix="model.layers.1.ple.ple_embedding")
    with pytest.raises(RuntimeError, match="shards 0, 1, 2 of 3"):
        h.finish_loading(model2)


def test_lookup_before_loading_is_refused(standin_engine):
    model, emb, _ = _fresh(standin_engine)
    with pytest.raises(RuntimeError, match="before its weights were loaded"):
        emb(torch.zeros(2, 1, dtype=torch.long, device=DEVICE))


# -- on the GPU: pinned host memory, the UVA view, a CUDA graph ---------------------------------


@gpu
@needs_cuda
def test_gpu_table_is_pinned_and_read_through_a_uva_view(engine):
    model, table, _, _ = build_loaded(engine, layout="split", per_shard=True)
    emb = model.ngram_embedding
    assert emb.ple4_table.device.type == "cpu" and emb.ple4_table.is_pinned()
    view, scale = emb.ple4_device_inputs(torch.device("cuda"))
    assert view.is_cuda and scale.is_cuda
    assert view.data_ptr() == emb.ple4_table.data_ptr()  # no copy of the table on the device
    ids = torch.randint(0, emb.org_vocab_size, (64, G.ngram_heads))
    assert torch.equal(bits(emb(ids.cuda())), bits(reference(table, ids)))


@gpu
@needs_cuda
def test_gpu_lookup_replays_in_a_cuda_graph(engine):
    model, table, _, _ = build_loaded(engine, layout="rowpacked")
    emb = model.ngram_embedding
    static_ids = torch.zeros(32, G.ngram_heads, dtype=torch.long, device="cuda")
    emb(static_ids)  # warm up (compile) outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = emb(static_ids)
    ids = torch.randint(0, emb.org_vocab_size, (32, G.ngram_heads))
    static_ids.copy_(ids.cuda())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(bits(static_out), bits(reference(table, ids)))


@gpu
@needs_cuda
def test_gpu_real_head_dim_160(standin_engine):
    geometry = h.Geometry(head_dim=160, ngram_size=3, heads_per_ngram=8, split_ngram_parts=5)
    model, table, _, _ = build_loaded(standin_engine, layout="split", geometry=geometry)
    emb = model.ngram_embedding
    ids = torch.randint(0, emb.org_vocab_size, (40, geometry.ngram_heads))
    assert torch.equal(bits(emb(ids.cuda())), bits(reference(table, ids, 160)))

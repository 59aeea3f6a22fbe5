"""The engine shapes the transform knows, and every real engine file stored as test data.

- The earlier shape (no dispatch: one plain ``self.ngram_embedding = VocabParallelEmbedding(...)``)
  goes through NgramEmbeddingWrap: golden tests/fixtures/transform/mini_plain.before.py ->
  wrap.after.py (PLE4_REGEN_GOLDEN=1 rewrites it) and every anchor. The same with the row-shard
  subclass ``PLEVocabParallelEmbedding`` of ``..common.ple``: mini_plain_subclass.before.py ->
  wrap_subclass.after.py, and where that name must come from.
- A version that cannot host the loader is refused with what it lacks first (facilities.diagnose):
  built without an engine module the injected loader needs, its n-gram embedding imported from
  another module, or an NVFP4 table of its own. Golden tests: tests/fixtures/transform/
  refuse_<kind>.before.py -> refuse_<kind>.refused.txt (the whole message; PLE4_REGEN_GOLDEN=1
  rewrites it), each beside the same file with the facility back, which gets the precise anchor.
- Each real file of tests/data/engines (INDEX.md) is patched, with only the expected changes, or
  refused with the message naming what that version lacks.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

import libcst as cst
from libcst.codemod import CodemodContext

from tools import engine_corpus
from ple4patch.errors import TransformError
from ple4patch.sentinel import sentinel_line
from ple4patch.transform import patch_source
from ple4patch.transform._common import BLOCK_BEGIN, BLOCK_END, injected_modules, split_injected
from ple4patch.transform.dispatch import NgramEmbeddingDispatch
from ple4patch.transform.facilities import RequireEngineFacilities
from ple4patch.transform.imports import AddInjectedImports
from ple4patch.transform.inject import InjectBlock
from ple4patch.transform.load_weights import LoadWeightsDispatch
from ple4patch.transform.pipeline import ngram_embedding_transform
from ple4patch.transform.wrap import NgramEmbeddingWrap

FIXTURES = Path(__file__).parent / "fixtures" / "transform"
PLAIN = (FIXTURES / "mini_plain.before.py").read_text(encoding="utf-8")
SUBCLASS = (FIXTURES / "mini_plain_subclass.before.py").read_text(encoding="utf-8")
MINI = (FIXTURES / "mini.before.py").read_text(encoding="utf-8")
WRAP = "Qwen4ExpNGramEmbedding.__init__ ngram_embedding assignment"


def fake_injected(loader_text: str | None = None):
    texts = {n: (FIXTURES / "injected" / f"{n}.py").read_text(encoding="utf-8") for n in ("nvfp4_gather", "nvfp4_loader")}
    if loader_text is not None:
        texts["nvfp4_loader"] = loader_text
    return tuple(split_injected(n, t) for n, t in texts.items())


def run(transform_cls, source: str, *args) -> str:
    return transform_cls(CodemodContext(), *args).transform_module(cst.parse_module(source)).code


# -- the earlier shape: NgramEmbeddingWrap ----------------------------------------------------


def test_wrap_golden():
    out = run(NgramEmbeddingWrap, PLAIN)
    golden = FIXTURES / "wrap.after.py"
    if os.environ.get("PLE4_REGEN_GOLDEN") == "1":
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")
    compile(out, golden.name, "exec")
    assert out != PLAIN


def test_wrap_composes_with_the_other_transforms():
    src = PLAIN
    for transform, args in ((AddInjectedImports, (fake_injected(),)), (InjectBlock, (fake_injected(),)),
                            (NgramEmbeddingWrap, ()), (LoadWeightsDispatch, ())):
        src = run(transform, src, *args)
    compile(src, "mini_plain", "exec")
    assert src.count(sentinel_line()) == 1


def test_the_pipeline_picks_the_codemod_by_shape():
    assert ngram_embedding_transform(cst.parse_module(PLAIN)) is NgramEmbeddingWrap
    assert ngram_embedding_transform(cst.parse_module(SUBCLASS)) is NgramEmbeddingWrap
    assert ngram_embedding_transform(cst.parse_module(MINI)) is NgramEmbeddingDispatch
    # a file with neither goes to the dispatch, which fails loudly on its missing anchor
    neither = PLAIN.replace("self.ngram_embedding = VocabParallelEmbedding(", "table = VocabParallelEmbedding(")
    assert ngram_embedding_transform(cst.parse_module(neither)) is NgramEmbeddingDispatch


@pytest.mark.parametrize(
    "mutation, detail",
    [
        (lambda s: s.replace("self.ngram_embedding = VocabParallelEmbedding(", "self.table = VocabParallelEmbedding("), "not found"),
        (lambda s: s.replace("        self.ready = True\n", "        self.ngram_embedding = VocabParallelEmbedding(1, 2, params_dtype=None, padding_size=1, prefix='x')\n        self.ready = True\n"), "found 2 times"),
        (lambda s: s.replace("        self.ready = True\n", "        if config.extra:\n            self.ngram_embedding = None\n        self.ready = True\n"), "also assigned elsewhere"),
        (lambda s: s.replace("self.ngram_embedding = VocabParallelEmbedding(", "self.ngram_embedding = OtherEmbedding("), "something else"),
        (lambda s: s.replace("            padding_size=divisor,\n", ""), "missing padding_size"),
        (lambda s: s.replace("            self.head_dim,\n", ""), "expected VocabParallelEmbedding(num_embeddings"),
        (lambda s: s.replace("        quant_config=None,\n", ""), "no parameter quant_config"),
    ],
    ids=["missing", "twice", "elsewhere", "callee", "keyword", "positional", "param"],
)
def test_wrap_anchors(mutation, detail):
    with pytest.raises(TransformError) as e:
        run(NgramEmbeddingWrap, mutation(PLAIN))
    assert e.value.anchor == WRAP
    assert detail in str(e.value)


# -- the earlier shape with the row-shard subclass of ..common.ple ------------------------------

SUBCLASS_IMPORT = "from ..common.ple import PLEVocabParallelEmbedding\n"


def test_wrap_subclass_golden():
    out = run(NgramEmbeddingWrap, SUBCLASS)
    golden = FIXTURES / "wrap_subclass.after.py"
    if os.environ.get("PLE4_REGEN_GOLDEN") == "1":
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")
    compile(out, golden.name, "exec")
    # the original statement survives as the else branch, one level in
    assert "        else:\n            self.ngram_embedding = PLEVocabParallelEmbedding(\n" in out
    assert "self.ngram_embedding = ple4_nvfp4_build_embedding(" in out


def test_the_whole_patch_takes_the_subclass_shape():
    patched = patch_source(SUBCLASS)
    assert patched.count(sentinel_line()) == 1
    assert "self.ngram_embedding = ple4_nvfp4_build_embedding(" in patched
    assert "def _ple4_stock_load_weights(" in patched
    compile(patched, "mini_plain_subclass", "exec")


def test_the_subclass_may_be_imported_by_its_absolute_module():
    absolute = SUBCLASS.replace(SUBCLASS_IMPORT, "from vllm.models.qwen4_exp.common.ple import PLEVocabParallelEmbedding\n")
    assert absolute != SUBCLASS
    assert "ple4_nvfp4_build_embedding(" in run(NgramEmbeddingWrap, absolute)


@pytest.mark.parametrize(
    "imports, detail",
    [
        ("from .tables import PLEVocabParallelEmbedding\n", "(PLEVocabParallelEmbedding is bound to .tables.PLEVocabParallelEmbedding)"),
        ("from ..common.ple import RowTable as PLEVocabParallelEmbedding\n", "(PLEVocabParallelEmbedding is bound to ..common.ple.RowTable)"),
        ("from ..common.ple import PLEVocabParallelEmbedding\nfrom .tables import PLEVocabParallelEmbedding\n", "is bound to .tables."),
        ("", "(PLEVocabParallelEmbedding is not imported at the top of the file)"),
    ],
    ids=["other-module", "alias", "rebound", "not-imported"],
)
def test_the_subclass_must_be_the_one_of_common_ple(imports, detail):
    source = SUBCLASS.replace(SUBCLASS_IMPORT, imports)
    with pytest.raises(TransformError) as e:
        run(NgramEmbeddingWrap, source)
    assert e.value.anchor == WRAP
    assert "something else than VocabParallelEmbedding(...) or PLEVocabParallelEmbedding(...) of ..common.ple" in str(e.value)
    assert detail in str(e.value)


def test_the_subclass_call_keeps_the_anchors_of_the_call():
    source = SUBCLASS.replace("            padding_size=divisor,\n", "")
    with pytest.raises(TransformError) as e:
        run(NgramEmbeddingWrap, source)
    assert "expected PLEVocabParallelEmbedding(num_embeddings, embedding_dim" in str(e.value)
    assert "missing padding_size" in str(e.value)


def test_wrap_refuses_a_second_application():
    once = run(NgramEmbeddingWrap, PLAIN)
    with pytest.raises(TransformError) as e:
        run(NgramEmbeddingWrap, once)
    assert e.value.anchor == WRAP and "already builds the NVFP4 table" in str(e.value)


# -- RequireEngineFacilities -------------------------------------------------------------------

_NEEDS_OFFLOAD = '''"""Fake loader that needs the engine's PLE offload layer."""

from vllm.model_executor.layers.ple_offload_layer import is_offload_process


def ple4_nvfp4_install(cls):
    return cls
'''


def test_facilities_refuse_a_version_without_the_offload_layer():
    injected = fake_injected(_NEEDS_OFFLOAD)
    with pytest.raises(TransformError) as e:
        run(RequireEngineFacilities, MINI, injected)
    assert e.value.anchor == "engine facilities"
    assert "vllm.model_executor.layers.ple_offload_layer" in str(e.value)
    assert "PleOffloadLayer, is_offload_process" in str(e.value)
    has_it = MINI.replace(
        "import torch\n", "import torch\n\nfrom vllm.model_executor.layers.ple_offload_layer import PleOffloadLayer\n", 1
    )
    assert run(RequireEngineFacilities, has_it, injected) == has_it  # a check: changes nothing
    assert run(RequireEngineFacilities, MINI, fake_injected()) == MINI  # not needed: no check


def test_the_real_loader_needs_the_offload_layer():
    # The facility table names a module the shipped loader really imports (else the check is void).
    needed = {
        cst.Module(body=()).code_for_node(small.module)
        for mod in injected_modules()
        for stmt in mod.imports
        for small in stmt.body
        if isinstance(small, cst.ImportFrom) and small.module is not None
    }
    assert "vllm.model_executor.layers.ple_offload_layer" in needed


# -- refusals: what the version lacks leads, the anchor that failed follows ----------------------

LOCALS = "Qwen4ExpNGramEmbedding.__init__ locals"
OFFLOAD_IMPORT = "from vllm.model_executor.layers.ple_offload_layer import PleOffloadLayer\n"
ALSO = "(the patch's anchors do not match either: anchor "
# fixture -> (anchor of the refusal, the structural anchor named second)
REFUSALS = {
    "refuse_no_offload": ("engine facilities", LOCALS),
    "refuse_moved_class": ("engine layout", "class Qwen4ExpNGramEmbedding"),
    "refuse_own_nvfp4": ("engine facilities", WRAP),
}


def _refusal(source: str) -> TransformError:
    with pytest.raises(TransformError) as e:
        patch_source(source)
    return e.value


def _fixture(name: str) -> str:
    return (FIXTURES / f"{name}.before.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusal_golden(name):
    error = _refusal(_fixture(name))
    golden = FIXTURES / f"{name}.refused.txt"
    if os.environ.get("PLE4_REGEN_GOLDEN") == "1":
        golden.write_text(str(error) + "\n", encoding="utf-8")
    assert str(error) + "\n" == golden.read_text(encoding="utf-8")
    lead, structural = REFUSALS[name]
    assert error.anchor == lead
    assert str(error).startswith(f"anchor {lead!r}: this engine version")
    assert f"{ALSO}{structural!r}: " in str(error)


def test_without_the_offload_layer_the_facility_leads():
    error = _refusal(_fixture("refuse_no_offload"))
    assert "built without vllm.model_executor.layers.ple_offload_layer" in str(error)
    assert "embedding_prefix not defined before the ngram_embedding dispatch)" in str(error)
    # The same file with the offload layer: the precise anchor alone, as before the diagnosis.
    hosting = _fixture("refuse_no_offload").replace("from torch import nn\n", "from torch import nn\n\n" + OFFLOAD_IMPORT, 1)
    error = _refusal(hosting)
    assert error.anchor == LOCALS
    assert str(error) == f"anchor {LOCALS!r}: embedding_prefix not defined before the ngram_embedding dispatch"


def test_an_imported_ngram_embedding_is_named_with_its_module():
    error = _refusal(_fixture("refuse_moved_class"))
    assert "does not define Qwen4ExpNGramEmbedding but imports it from .ngram_embedding" in str(error)
    # Neither defined nor imported: nothing to diagnose, the class anchor alone.
    neither = _fixture("refuse_moved_class").replace("from .ngram_embedding import Qwen4ExpNGramEmbedding\n", "")
    error = _refusal(neither)
    assert error.anchor == "class Qwen4ExpNGramEmbedding" and ALSO not in str(error)


def test_an_nvfp4_table_of_the_engine_is_refused_whatever_the_structure():
    own = _fixture("refuse_own_nvfp4")
    assert "PackedNvFp4TableMethod" in str(_refusal(own)) and "(ple_lookup_fake) reads ngram_embedding.weight" in str(_refusal(own))
    # A structure the transforms can change: refused all the same, by the check after them.
    plain = own.replace("self.ngram_embedding = RowShardEmbedding(", "self.ngram_embedding = VocabParallelEmbedding(")
    error = _refusal(plain)
    assert error.anchor == "engine facilities" and ALSO not in str(error)
    # No fake reading the table's weight: still two NVFP4 tables in one file.
    no_fake = own.replace("table = layer.ple_embedding.ngram_embedding.weight", "table = layer.ple_embedding.table")
    assert "would put a second NVFP4 table beside it" in str(_refusal(no_fake))
    # The same file with an FP8 method instead: no table of its own, the precise anchor alone.
    fp8 = own.replace("PackedNvFp4TableMethod", "PackedFp8TableMethod")
    error = _refusal(fp8)
    assert error.anchor == WRAP and ALSO not in str(error)
    assert "something else than VocabParallelEmbedding" in str(error)


# -- every real engine file of tests/data/engines -----------------------------------------------

# What each stored version gets, from reading it (INDEX.md names repository and commit):
# main-45d0a3bb builds its table without vllm.model_executor.layers.ple_offload_layer;
# fork-leonccaa-12f2ad43 is the earlier shape (a plain assignment, no dispatch); main-6bca559d
# has the if/elif dispatch of 15a8d185; fork-quixiai-608ed6fb (QuixiAI/SlimServe 608ed6fb) has an
# `if envs.VLLM_QWEN4_EXP_PLE_HOST:` / `else:` dispatch without the offload layer (and without
# the `embedding_prefix` local the NVFP4 branch passes: named second);
# fork-113636xfh-18b0b44e has the pinned-host if/else dispatch on the offload layer;
# fork-01554-4d8c2171 (01554/vllm 4d8c2171) has an `if ple_mmap.enabled():` / `else:` dispatch,
# again without the offload layer (and without `embedding_prefix`); fork-1ytic-dc12c02e
# (1ytic/vllm dc12c02e) has the offload layer and one plain assignment of
# PLEVocabParallelEmbedding (which the wrap accepts), but ships its own NVFP4 table
# (Qwen4ExpPLENVFp4EmbeddingMethod) and its op's fake qwen4_exp_ple_embed_fake reads
# `embedding.ngram_embedding.weight.dtype`, which the NVFP4 row-packed table has not (refused by
# the check after the transforms); fork-madeby561-d840593c (MadeBy561/vllm d840593c) imports
# Qwen4ExpNGramEmbedding from .ngram_embedding instead of defining it; fork-zyx-a-52fa42ff
# (Zyx-A/1Cat-vLLM 52fa42ff) has the disk/pinned-host/plain if/elif/else dispatch on the offload
# layer.
# A refusal is (anchor, texts its message holds, in order); None: no structural anchor failed.
NO_OFFLOAD = "is built without vllm.model_executor.layers.ple_offload_layer"
EXPECTED = {
    "main-45d0a3bb": ("refused", ("engine facilities", (NO_OFFLOAD,), None)),
    "fork-leonccaa-12f2ad43": ("patched", NgramEmbeddingWrap),
    "main-6bca559d": ("patched", NgramEmbeddingDispatch),
    "main-fc3daf73": ("patched", NgramEmbeddingDispatch),
    "fork-113636xfh-18b0b44e": ("patched", NgramEmbeddingDispatch),
    "fork-zyx-a-52fa42ff": ("patched", NgramEmbeddingDispatch),
    "fork-quixiai-608ed6fb": ("refused", ("engine facilities", (NO_OFFLOAD,), f"{LOCALS}': embedding_prefix not defined")),
    "fork-01554-4d8c2171": ("refused", ("engine facilities", (NO_OFFLOAD,), f"{LOCALS}': embedding_prefix not defined")),
    "fork-1ytic-dc12c02e": ("refused", (
        "engine facilities",
        ("ships its own NVFP4 PLE table (Qwen4ExpPLENVFp4EmbeddingMethod",
         "(qwen4_exp_ple_embed_fake) reads ngram_embedding.weight"),
        None)),
    "fork-madeby561-d840593c": ("refused", (
        "engine layout",
        ("does not define Qwen4ExpNGramEmbedding but imports it from .ngram_embedding",),
        "class Qwen4ExpNGramEmbedding': top-level class Qwen4ExpNGramEmbedding not found")),
    # The further rows of INDEX.md: the disk/pinned-host/plain dispatch on the offload layer
    # (chainzeaxion, peuqui, qixiao02, abcd19886, cookys; areslp with a packed-GGUF branch first),
    # upstream vllm-project/vllm 020a97c7's plain VocabParallelEmbedding assignment (the earlier
    # shape, which the transforms can change) with 1ytic's NVFP4 table of its own and the same
    # qwen4_exp_ple_embed_fake reading `embedding.ngram_embedding.weight.dtype` (refused by the
    # check after the transforms), and D-G-Dimitrov/vllm 337d3f5d's plain
    # PLEVocabParallelEmbedding assignment (`from ..common.ple`, as 1ytic's) on the offload layer,
    # with no NVFP4 table of its own and no op fake reading the table's weight: wrapped.
    "fork-chainzeaxion-ebeb346a": ("patched", NgramEmbeddingDispatch),
    "fork-peuqui-03b8cb99": ("patched", NgramEmbeddingDispatch),
    "fork-qixiao02-0aac941e": ("patched", NgramEmbeddingDispatch),
    "fork-abcd19886-0e4384ec": ("patched", NgramEmbeddingDispatch),
    "fork-cookys-1b5731f9": ("patched", NgramEmbeddingDispatch),
    "fork-areslp-1af83d81": ("patched", NgramEmbeddingDispatch),
    "fork-vllm-project-020a97c7": ("refused", (
        "engine facilities",
        ("ships its own NVFP4 PLE table (Qwen4ExpPLENVFp4EmbeddingMethod",
         "(qwen4_exp_ple_embed_fake) reads ngram_embedding.weight"),
        None)),
    "fork-d-g-dimitrov-337d3f5d": ("patched", NgramEmbeddingWrap),
    # Second versions of two forks: rapatel0 b850ff73 and Peuqui 5099866f, the disk/pinned-host/
    # plain dispatch on the offload layer (no cascade); 113636xfh acfc5318, the earlier shape
    # (a plain VocabParallelEmbedding on the offload layer, no dispatch): wrapped.
    "fork-rapatel0-b850ff73": ("patched", NgramEmbeddingDispatch),
    "fork-peuqui-5099866f": ("patched", NgramEmbeddingDispatch),
    "fork-113636xfh-acfc5318": ("patched", NgramEmbeddingWrap),
    # areslp ab4792a6 (packed-GGUF branch first, as 1af83d81) and cookys aa0bf8f0 (036318a0's
    # dispatch with exact-size host pinning): the dispatch on the offload layer.
    "fork-areslp-ab4792a6": ("patched", NgramEmbeddingDispatch),
    "fork-cookys-aa0bf8f0": ("patched", NgramEmbeddingDispatch),
    # Qixiao02 7ee70bdc (0aac941e's with a by-name gather op beside the pointer one), Zyx-A
    # dd691db6 and abcd19886 6a29be22 (earlier than 0e4384ec): the same dispatch.
    "fork-qixiao02-7ee70bdc": ("patched", NgramEmbeddingDispatch),
    "fork-zyx-a-dd691db6": ("patched", NgramEmbeddingDispatch),
    "fork-abcd19886-6a29be22": ("patched", NgramEmbeddingDispatch),
    # Fifteen more 1CatAI main commits, from the 1.5.0-era shape (51d8f042, a3e37865: the raw
    # `weight_ptr` op) to the tiered dispatch with GGUF, the cascade and the prefill ops: each
    # has the dispatch on the offload layer.
    "main-a3e37865": ("patched", NgramEmbeddingDispatch),
    "main-51d8f042": ("patched", NgramEmbeddingDispatch),
    "main-b8f9c1aa": ("patched", NgramEmbeddingDispatch),
    "main-a0ddaa2f": ("patched", NgramEmbeddingDispatch),
    "main-5eada56e": ("patched", NgramEmbeddingDispatch),
    "main-e63cc182": ("patched", NgramEmbeddingDispatch),
    "main-a5aa51fd": ("patched", NgramEmbeddingDispatch),
    "main-679a8498": ("patched", NgramEmbeddingDispatch),
    "main-fd0430e2": ("patched", NgramEmbeddingDispatch),
    "main-51e7c8bc": ("patched", NgramEmbeddingDispatch),
    "main-732e6477": ("patched", NgramEmbeddingDispatch),
    "main-78602753": ("patched", NgramEmbeddingDispatch),
    "main-22ab8e07": ("patched", NgramEmbeddingDispatch),
    "main-6d7071b6": ("patched", NgramEmbeddingDispatch),
    "main-8d726e9e": ("patched", NgramEmbeddingDispatch),
}
CORPUS = engine_corpus.corpus_files("ple_layer.py")  # those present here (the files are not committed)
CORPUS_PARAMS = [pytest.param(r, id=r.label) for r in CORPUS] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no tests/data/engines file is present here"), id="none")]


def _statement_lines(text: str, first: str) -> tuple[int, int]:
    """Line span [start, end) of the statement whose first line is ``first`` (closing paren at its indent)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == first)
    indent = first[: len(first) - len(first.lstrip())]
    end = next(i for i in range(start + 1, len(lines)) if lines[i].rstrip("\n") == indent + ")") + 1
    return start, end


def _only_insertions(original: str, patched: str) -> None:
    a, b = original.splitlines(keepends=True), patched.splitlines(keepends=True)
    changed = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] in ("replace", "delete")]
    assert not changed, changed


def test_every_indexed_file_is_listed_with_its_expectation():
    assert {row.label for row in engine_corpus.indexed("ple_layer.py")} == set(EXPECTED)


@pytest.mark.parametrize("row", CORPUS_PARAMS)
def test_real_corpus_file(row):
    text = engine_corpus.check(row).decode("utf-8")
    outcome, detail = EXPECTED[row.label]
    if outcome == "refused":
        anchor, facts, structural = detail
        message = str(_refusal(text))
        assert message.startswith(f"anchor {anchor!r}: ")
        positions = [message.index(fact) for fact in facts]
        assert positions == sorted(positions)
        if structural is None:
            assert ALSO not in message
        else:
            assert message.index(ALSO + "'" + structural) > positions[-1]
        return
    assert ngram_embedding_transform(cst.parse_module(text)) is detail
    patched = patch_source(text)
    compile(patched, "ple_layer.py", "exec")
    assert len(re.findall("^" + re.escape(sentinel_line()) + "$", patched, re.M)) == 1
    assert patch_source(text) == patched
    with pytest.raises(TransformError):
        patch_source(patched)
    for mod in injected_modules():
        assert mod.body in patched
    assert patched.index(BLOCK_BEGIN) < patched.index(BLOCK_END) < patched.index("\n__all__ = [")
    if detail is NgramEmbeddingWrap:
        # Every original line survives in order; the wrapped statement is the same text, one level in.
        first = re.search(r"^        self\.ngram_embedding = (PLE)?VocabParallelEmbedding\($", text, re.M).group(0)
        start, end = _statement_lines(text, first)
        lines = text.splitlines(keepends=True)
        shifted = "".join(lines[:start] + ["    " + line for line in lines[start:end]] + lines[end:])
        _only_insertions(shifted, patched)
    else:
        # Every original line survives in order but the dispatch's first `if`, now an `elif`.
        a, b = text.splitlines(keepends=True), patched.splitlines(keepends=True)
        removed = [
            line
            for op, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if op in ("replace", "delete")
            for line in a[i1:i2]
        ]
        assert len(removed) == 1 and removed[0].lstrip().startswith("if "), removed
        assert removed[0].replace("if ", "elif ", 1) in b

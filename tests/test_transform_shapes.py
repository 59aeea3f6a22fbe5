"""The engine shapes the transform knows, and every real engine file stored as test data.

- The earlier shape (no dispatch: one plain ``self.ngram_embedding = VocabParallelEmbedding(...)``)
  goes through NgramEmbeddingWrap: golden tests/fixtures/transform/mini_plain.before.py ->
  wrap.after.py (PLE4_REGEN_GOLDEN=1 rewrites it) and every anchor.
- RequireEngineFacilities refuses a version whose ple_layer.py is built without an engine module
  the injected loader needs.
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


# -- every real engine file of tests/data/engines -----------------------------------------------

# What each stored version gets, from reading it (INDEX.md names repository and commit):
# main-45d0a3bb builds its table without vllm.model_executor.layers.ple_offload_layer;
# fork-leonccaa-12f2ad43 is the earlier shape (a plain assignment, no dispatch); main-6bca559d
# has the if/elif dispatch of 15a8d185; fork-quixiai-608ed6fb (QuixiAI/SlimServe 608ed6fb) has an
# `if envs.VLLM_QWEN4_EXP_PLE_HOST:` / `else:` dispatch without the `embedding_prefix` local the
# NVFP4 branch passes (and without the offload layer: structural anchors are reported first);
# fork-113636xfh-18b0b44e has the pinned-host if/else dispatch on the offload layer;
# fork-01554-4d8c2171 (01554/vllm 4d8c2171) has an `if ple_mmap.enabled():` / `else:` dispatch,
# again without `embedding_prefix` and without the offload layer; fork-1ytic-dc12c02e (1ytic/vllm
# dc12c02e) has the offload layer and one plain assignment, but of PLEVocabParallelEmbedding;
# fork-madeby561-d840593c (MadeBy561/vllm d840593c) imports Qwen4ExpNGramEmbedding from
# .ngram_embedding instead of defining it; fork-zyx-a-52fa42ff (Zyx-A/1Cat-vLLM 52fa42ff) has the
# disk/pinned-host/plain if/elif/else dispatch on the offload layer.
# A refusal is (anchor, text its message holds).
EXPECTED = {
    "main-45d0a3bb": ("refused", ("engine facilities", "vllm.model_executor.layers.ple_offload_layer")),
    "fork-leonccaa-12f2ad43": ("patched", NgramEmbeddingWrap),
    "main-6bca559d": ("patched", NgramEmbeddingDispatch),
    "main-fc3daf73": ("patched", NgramEmbeddingDispatch),
    "fork-113636xfh-18b0b44e": ("patched", NgramEmbeddingDispatch),
    "fork-zyx-a-52fa42ff": ("patched", NgramEmbeddingDispatch),
    "fork-quixiai-608ed6fb": ("refused", ("Qwen4ExpNGramEmbedding.__init__ locals", "embedding_prefix not defined")),
    "fork-01554-4d8c2171": ("refused", ("Qwen4ExpNGramEmbedding.__init__ locals", "embedding_prefix not defined")),
    "fork-1ytic-dc12c02e": ("refused", (WRAP, "something else than VocabParallelEmbedding")),
    "fork-madeby561-d840593c": ("refused", ("class Qwen4ExpNGramEmbedding", "Qwen4ExpNGramEmbedding not found")),
    # Read this session (INDEX.md rows): the disk/pinned-host/plain dispatch on the offload layer
    # (chainzeaxion, peuqui, qixiao02, abcd19886, cookys; areslp with a packed-GGUF branch first),
    # upstream vllm-project/vllm's plain VocabParallelEmbedding assignment (the earlier shape), and
    # D-G-Dimitrov/vllm's plain PLEVocabParallelEmbedding assignment (as 1ytic's).
    "fork-chainzeaxion-ebeb346a": ("patched", NgramEmbeddingDispatch),
    "fork-peuqui-03b8cb99": ("patched", NgramEmbeddingDispatch),
    "fork-qixiao02-0aac941e": ("patched", NgramEmbeddingDispatch),
    "fork-abcd19886-0e4384ec": ("patched", NgramEmbeddingDispatch),
    "fork-cookys-1b5731f9": ("patched", NgramEmbeddingDispatch),
    "fork-areslp-1af83d81": ("patched", NgramEmbeddingDispatch),
    "fork-vllm-project-020a97c7": ("patched", NgramEmbeddingWrap),
    "fork-d-g-dimitrov-337d3f5d": ("refused", (WRAP, "something else than VocabParallelEmbedding")),
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
        anchor, message = detail
        with pytest.raises(TransformError) as e:
            patch_source(text)
        assert e.value.anchor == anchor and message in str(e.value)
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
        start, end = _statement_lines(text, "        self.ngram_embedding = VocabParallelEmbedding(")
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

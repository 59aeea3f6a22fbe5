"""Checks (change nothing): the target's engine version can host the injected NVFP4 loader.

Each check reads one fact of the engine version from the original ``ple_layer.py`` and, when the
version cannot host the loader, returns the Finding a user can act on (which engine
module it lacks, where its n-gram embedding lives instead, what it ships that would conflict).
``diagnose`` runs them in order. The pipeline runs it on the original text twice: after the
structural transforms succeed (a file they can change may still lack a facility), and when one
of them fails (then a finding here leads the error and the anchor that failed follows it).

Known cases (tests/data/engines, INDEX.md):
- ``lacking_modules``: 1CatAI/1Cat-vLLM 45d0a3bbba81ef9b0e9f09b9b092239984847e01,
  QuixiAI/SlimServe 608ed6fbc73a169ac21f4affd4b4f7b4390f3d22 and 01554/vllm
  4d8c2171beaf2bbcee4e2cab33d4f7a30422d862 build their PLE table without
  ``vllm.model_executor.layers.ple_offload_layer``; every version that patches imports
  ``PleOffloadLayer`` and ``is_offload_process`` from it.
- ``moved_class``: MadeBy561/vllm d840593c277811d5d81980027000784f545a3dd5 imports the class
  (``from .ngram_embedding import Qwen4ExpNGramEmbedding``) instead of defining it.
- ``own_nvfp4_table``: 1ytic/vllm dc12c02effa1329de045496a183baf166a38cef5 (and vllm-project/vllm
  020a97c768b88cb61049abc3961ad9d7793ca10e, the same method and op fake) defines
  ``Qwen4ExpPLENVFp4EmbeddingMethod`` (a ModelOpt NVFP4 table kept packed on the device) and
  registers ``qwen4_exp_ple_embed`` whose fake implementation reads
  ``embedding.ngram_embedding.weight.dtype``; ple4patch's table has no ``weight`` parameter, so
  tracing the model for compilation would fail on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ._common import NGRAM_CLASS, InjectedModule, dotted, import_bindings, is_import_line

ANCHOR = "engine facilities"
LAYOUT_ANCHOR = "engine layout"
CANNOT_HOST = "this 1cat-vllm version cannot host the NVFP4 row-packed loader (nothing was changed)"

# Engine modules that exist only in some engine versions -> what they are, in a user's words.
# A module the injected code imports must be imported by the target too when it is listed here.
VERSION_SPECIFIC_MODULES = {
    "vllm.model_executor.layers.ple_offload_layer": (
        "the PLE CPU-offload layer (PleOffloadLayer, is_offload_process)"
    ),
}
# The engine's base of table methods; a subclass of it named for NVFP4 is an NVFP4 table of its own.
QUANT_METHOD_BASE = "QuantizeMethodBase"

_NGRAM_WEIGHT = m.Attribute(value=m.Attribute(attr=m.Name("ngram_embedding")), attr=m.Name("weight"))


@dataclass(frozen=True)
class Finding:
    """Why the engine version cannot host the loader: the anchor (the fact checked) and what a
    user can act on."""

    anchor: str
    detail: str

    def error(self) -> TransformError:
        return TransformError(self.anchor, self.detail)


def _modules_imported(stmts: Sequence[cst.CSTNode]) -> set[str]:
    found: set[str] = set()
    for stmt in stmts:
        if not is_import_line(stmt):
            continue
        for small in stmt.body:  # type: ignore[attr-defined]
            if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
                found.add(dotted(small.module))
            elif isinstance(small, cst.Import):
                found.update(dotted(alias.name) for alias in small.names)
    return found


def lacking_modules(tree: cst.Module, injected: Sequence[InjectedModule]) -> Finding | None:
    """A module of ``VERSION_SPECIFIC_MODULES`` that the injected code imports and the target does not."""
    needed = _modules_imported([s for mod in injected for s in mod.imports])
    have = _modules_imported(tree.body)
    lacking = [name for name in VERSION_SPECIFIC_MODULES if name in needed and name not in have]
    if not lacking:
        return None
    what = "; ".join(f"{name}, {VERSION_SPECIFIC_MODULES[name]}," for name in lacking)
    return Finding(
        ANCHOR,
        f"this engine version's ple_layer.py is built without {what} which the NVFP4 "
        "loader needs: this 1cat-vllm version cannot host it (nothing was changed); "
        "use a 1cat-vllm version whose PLE layer imports it",
    )


def moved_class(tree: cst.Module) -> Finding | None:
    """``Qwen4ExpNGramEmbedding`` imported from another module instead of defined here."""
    defined = any(isinstance(s, cst.ClassDef) and s.name.value == NGRAM_CLASS for s in tree.body)
    if defined:
        return None
    for stmt in tree.body:
        if not is_import_line(stmt):
            continue
        for small in stmt.body:  # type: ignore[attr-defined]
            one_line = cst.SimpleStatementLine(body=[small])
            if any(bound == NGRAM_CLASS for bound, _ in import_bindings(one_line)):
                source = "." * len(small.relative) + dotted(small.module) if isinstance(small, cst.ImportFrom) else ""
                where = f"from {source}" if source else "by 'import'"
                beside = " (a module beside ple_layer.py)" if source.startswith(".") else ""
                return Finding(
                    LAYOUT_ANCHOR,
                    f"this engine version's ple_layer.py does not define {NGRAM_CLASS} but imports "
                    f"it {where}{beside}: its n-gram embedding lives in a module ple4patch does not "
                    f"patch, a layout ple4patch does not support; {CANNOT_HOST}",
                )
    return None


def _own_nvfp4_methods(tree: cst.Module) -> list[str]:
    return [
        s.name.value
        for s in tree.body
        if isinstance(s, cst.ClassDef)
        and "nvfp4" in s.name.value.lower()
        and any(_base_name(b.value) == QUANT_METHOD_BASE for b in s.bases)
    ]


def _base_name(node: cst.BaseExpression) -> str:
    try:
        return dotted(node).rsplit(".", 1)[-1]
    except TypeError:
        return ""


def _fakes_reading_the_weight(tree: cst.Module) -> list[str]:
    """Top-level fake implementations of custom ops that read ``<x>.ngram_embedding.weight``."""
    return [
        s.name.value
        for s in tree.body
        if isinstance(s, cst.FunctionDef) and s.name.value.endswith("_fake") and m.findall(s, _NGRAM_WEIGHT)
    ]


def own_nvfp4_table(tree: cst.Module) -> Finding | None:
    """An NVFP4 table method of the engine's own (the second NVFP4 table would conflict with it)."""
    methods = _own_nvfp4_methods(tree)
    if not methods:
        return None
    fakes = _fakes_reading_the_weight(tree)
    why = (
        f", and the fake implementation of its PLE custom op ({', '.join(fakes)}) reads "
        "ngram_embedding.weight, which ple4patch's pinned-host table does not have: vLLM would "
        "fail when it traces the model for compilation"
        if fakes
        else ": ple4patch would put a second NVFP4 table beside it"
    )
    return Finding(
        ANCHOR,
        f"this engine version ships its own NVFP4 PLE table ({', '.join(methods)}, a "
        f"{QUANT_METHOD_BASE} of its ple_layer.py){why}; {CANNOT_HOST}: "
        "serve NVFP4 checkpoints with the engine's own NVFP4 table instead",
    )


def diagnose(tree: cst.Module, injected: Sequence[InjectedModule]) -> Finding | None:
    """The first reason this engine version cannot host the loader, or None (in this order:
    where the class lives, the modules it lacks, a table of its own)."""
    findings = (moved_class(tree), lacking_modules(tree, injected), own_nvfp4_table(tree))
    return next((f for f in findings if f is not None), None)


class RequireEngineFacilities(CodemodCommand):
    """Refuse a target whose engine version cannot host the loader (``diagnose``). Changes nothing.

    Anchors: ``Qwen4ExpNGramEmbedding`` defined in the target, not imported; for each module of
    ``VERSION_SPECIFIC_MODULES`` the injected code imports, a top-level import of it in the
    target; no NVFP4 table method of the engine's own.
    """

    DESCRIPTION = "Check that the engine version can host the NVFP4 PLE loader."

    def __init__(self, context: CodemodContext, injected: Sequence[InjectedModule]) -> None:
        super().__init__(context)
        self.injected = tuple(injected)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        finding = diagnose(tree, self.injected)
        if finding is not None:
            raise finding.error()
        return tree

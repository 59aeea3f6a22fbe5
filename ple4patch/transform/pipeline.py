"""The whole patch: every transform in order, then checks on the output."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ..sentinel import SENTINEL_PREFIX, find_patch_id, sentinel_line
from ._common import BLOCK_BEGIN, InjectedModule, class_methods, find_class, injected_modules, refuse_lone_cr
from .dispatch import NgramEmbeddingDispatch
from .facilities import RequireEngineFacilities, diagnose
from .imports import AddInjectedImports
from .inject import InjectBlock
from .load_weights import LoadWeightsDispatch
from .wrap import SELF_NGRAM, NgramEmbeddingWrap, has_plain_assignment

_BOM = "\ufeff"
# In order; NgramEmbeddingDispatch stands for the change that builds the NVFP4 table, which is
# NgramEmbeddingWrap in the earlier engine shape (see ngram_embedding_transform).
TRANSFORMS = (AddInjectedImports, InjectBlock, NgramEmbeddingDispatch, LoadWeightsDispatch)
NEEDS_INJECTED = (AddInjectedImports, InjectBlock)
# Checks that change nothing; they run on the original tree after the transforms. When a
# transform fails on its anchor, the same diagnosis runs first (see ``_structural_error``).
CHECKS = (RequireEngineFacilities,)


def ngram_embedding_transform(tree: cst.Module) -> type[CodemodCommand]:
    """The codemod for the engine's shape: a dispatch (an ``if`` chain that assigns
    ``self.ngram_embedding``) gets a first branch; a single plain assignment is wrapped."""
    _, cls = find_class(tree)
    inits = class_methods(cls, "__init__")
    if len(inits) == 1:
        init = inits[0][1]
        chains = [
            s for s in init.body.body  # type: ignore[union-attr]
            if isinstance(s, cst.If) and m.findall(s, SELF_NGRAM)
        ]
        if not chains and has_plain_assignment(init):
            return NgramEmbeddingWrap
    return NgramEmbeddingDispatch


def _sentinel_count(text: str) -> int:
    return len(re.findall(r"^" + re.escape(sentinel_line()) + r"\s*$", text, flags=re.MULTILINE))


def _run(codemod: CodemodCommand, tree: cst.Module) -> cst.Module:
    """``codemod.transform_module(tree)`` without the metadata pass when it reads no metadata.

    ``Codemod.transform_module`` wraps the tree in a ``MetadataWrapper``, which deep-clones the
    whole module; for the 127 KB engine file that was ~70 % of ``apply``'s time (4 clones).
    None of our transforms declares METADATA_DEPENDENCIES or queues AddImports/RemoveImports
    work in ``context.scratch``, so calling ``transform_module_impl`` gives the same tree.
    """
    if codemod.get_inherited_dependencies():
        return codemod.transform_module(tree)
    out = codemod.transform_module_impl(tree)
    if codemod.context.scratch:  # queued follow-up visitors: let libcst run them
        return codemod.transform_module(tree)
    return out


def _structural_error(exc: TransformError, original: cst.Module, injected: tuple[InjectedModule, ...]) -> TransformError:
    """The error for a transform that missed its anchor: what the engine version lacks first,
    when the facility diagnosis finds it (a missing anchor is then its consequence, named
    second), else the anchor error itself."""
    finding = diagnose(original, injected)
    if finding is None:
        return exc
    return TransformError(finding.anchor, f"{finding.detail} (the patch's anchors do not match either: {exc})")


def patch_source(source: str) -> str:
    refuse_lone_cr(source)
    patch_id = find_patch_id(source)
    if patch_id is not None:
        raise TransformError(
            "sentinel", f"the file is already patched (patch-id={patch_id}); revert it first"
        )
    if BLOCK_BEGIN in source or SENTINEL_PREFIX in source:
        raise TransformError(
            "sentinel", "the file carries a ple4patch block without a valid sentinel line; restore the original"
        )
    try:
        tree = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise TransformError("module", f"does not parse as Python: {str(exc).splitlines()[0]}") from None
    injected = injected_modules()
    context = CodemodContext()
    original = tree
    try:
        for transform in TRANSFORMS:
            if transform is NgramEmbeddingDispatch:
                transform = ngram_embedding_transform(tree)
            if transform in NEEDS_INJECTED:
                tree = _run(transform(context, injected), tree)
            else:
                tree = _run(transform(context), tree)
    except TransformError as exc:
        raise _structural_error(exc, original, injected) from None
    for check in CHECKS:
        _run(check(context, injected), original)
    out = tree.code
    if source.startswith(_BOM) and not out.startswith(_BOM):
        # libcst drops a UTF-8 BOM: keep it, so that the output (and its pin) is this file's own,
        # never the same bytes as the patch of the file without it
        out = _BOM + out
    if _sentinel_count(out) != 1:
        raise TransformError("sentinel", "the patched text does not carry the sentinel line exactly once")
    try:
        compile(out.encode("utf-8"), "ple_layer.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TransformError("output", f"the patched text does not compile: {exc}") from None
    return out

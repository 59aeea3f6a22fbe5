"""The whole patch: every transform in order, then checks on the output."""

from __future__ import annotations

import re

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ..sentinel import SENTINEL_PREFIX, find_patch_id, sentinel_line
from ._common import BLOCK_BEGIN, injected_modules
from .dispatch import NgramEmbeddingDispatch
from .imports import AddInjectedImports
from .inject import InjectBlock
from .load_weights import LoadWeightsDispatch

_BOM = "\ufeff"
TRANSFORMS = (AddInjectedImports, InjectBlock, NgramEmbeddingDispatch, LoadWeightsDispatch)


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


def patch_source(source: str) -> str:
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
    for transform in TRANSFORMS:
        if transform in (AddInjectedImports, InjectBlock):
            tree = _run(transform(context, injected), tree)
        else:
            tree = _run(transform(context), tree)
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

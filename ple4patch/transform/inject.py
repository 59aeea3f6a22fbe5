"""Change 2: inject the kernel and the loader (ple4patch.kernels) as one delimited block."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ..sentinel import sentinel_line
from ._common import (
    BLOCK_BEGIN,
    BLOCK_END,
    INJECTED_PACKAGE,
    NGRAM_CLASS,
    InjectedModule,
    find_class,
    module_level_names,
    one,
)

ANCHOR = "__all__"
INSTALL_CALL = f"ple4_nvfp4_install({NGRAM_CLASS})"

_FIRST = "__ple4_block_start__ = None"
_LAST = "__ple4_block_end__ = None"


def block_text(injected: Sequence[InjectedModule]) -> str:
    """The injected block, delimited by comments, with the sentinel line once."""
    parts = [
        BLOCK_BEGIN + " (generated; `ple4patch revert` restores the original file)",
        sentinel_line(),
    ]
    for mod in injected:
        parts.append(f"# --- from {INJECTED_PACKAGE}.{mod.name} ---")
        parts.append("")
        parts.append("")
        parts.append(mod.body.rstrip("\n"))
        parts.append("")
        parts.append("")
    parts.append(f"# Refuse unsupported PLE modes even where PleOffloadLayer skips {NGRAM_CLASS}.__init__.")
    parts.append(INSTALL_CALL)
    parts.append(BLOCK_END)
    return "\n".join(parts) + "\n"


class InjectBlock(CodemodCommand):
    """Insert the injected block just before the module's ``__all__`` assignment.

    There every name the block uses is defined: the engine's imports, the names the imports
    transform adds, and ``Qwen4ExpNGramEmbedding`` (whose constructor the block guards). Anchors:
    one top-level ``__all__ = ...`` after one top-level ``class Qwen4ExpNGramEmbedding``; no
    top-level name of the block may already exist in the target.
    """

    DESCRIPTION = "Inject the NVFP4 PLE gather kernel and loader."

    def __init__(self, context: CodemodContext, injected: Sequence[InjectedModule]) -> None:
        super().__init__(context)
        self.injected = tuple(injected)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        body = list(tree.body)
        all_assign = m.SimpleStatementLine(
            body=[m.Assign(targets=[m.AssignTarget(target=m.Name("__all__"))])]
        )
        index = one([i for i, s in enumerate(body) if m.matches(s, all_assign)], ANCHOR, "top-level '__all__ = [...]'")
        class_index, _ = find_class(tree)
        if class_index > index:
            raise TransformError(ANCHOR, f"'__all__' comes before class {NGRAM_CLASS}; expected it after")
        existing = module_level_names(tree)
        clashes = sorted({n for mod in self.injected for n in mod.defines} & existing)
        if clashes:
            raise TransformError(
                "injected names",
                f"the target already defines {', '.join(clashes[:5])}; it is patched or foreign",
            )

        parsed = cst.parse_module(_FIRST + "\n" + block_text(self.injected) + "\n\n" + _LAST + "\n")
        new = list(parsed.body[1:-1])
        closing = parsed.body[-1].leading_lines  # the end comment and two blank lines
        target = body[index]
        new[0] = new[0].with_changes(leading_lines=[*target.leading_lines, *new[0].leading_lines])
        body[index] = target.with_changes(leading_lines=closing)
        return tree.with_changes(body=body[:index] + new + body[index:])

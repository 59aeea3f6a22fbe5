"""Change 1: the imports the injected code needs that the target lacks (idempotent)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ._common import INJECTED_PACKAGE, InjectedModule, import_bindings, is_docstring, is_import_line, top_level_definitions, top_level_imports

ANCHOR = "module imports"
COMMENT = "# ple4patch: imports of the injected NVFP4 PLE code"

# Bindings that are the same object under another import path.
EQUIVALENT_SOURCES = {
    "vllm.triton_utils.triton": "triton",
    "vllm.triton_utils.tl": "triton.language",
}


def _same_source(a: str, b: str) -> bool:
    return EQUIVALENT_SOURCES.get(a, a) == EQUIVALENT_SOURCES.get(b, b)


class AddInjectedImports(CodemodCommand):
    """Add, after the module's leading import block, each import line of the injected modules
    whose names the target does not bind yet.

    A name the target already binds to the same object counts as present; a name it binds to
    something else is a conflict (TransformError). Imports of the injected modules themselves
    (``ple4patch.kernels.*``) are satisfied by the injected block. Anchor: the leading block of
    import lines (at least one).
    """

    DESCRIPTION = "Import what the injected NVFP4 PLE code needs."

    def __init__(self, context: CodemodContext, injected: Sequence[InjectedModule]) -> None:
        super().__init__(context)
        self.injected = tuple(injected)

    def _needed(self, module: cst.Module) -> list[cst.SimpleStatementLine]:
        imported = top_level_imports(module)
        defined = top_level_definitions(module)
        provided = {name for mod in self.injected for name in mod.defines}
        needed: list[cst.SimpleStatementLine] = []
        planned: set[str] = set()
        for mod in self.injected:
            for stmt in mod.imports:
                missing: list[cst.ImportAlias] = []
                for small in stmt.body:
                    if isinstance(small, cst.ImportFrom) and not small.relative:
                        source_module = cst.Module(body=()).code_for_node(small.module)
                        if source_module.startswith(INJECTED_PACKAGE + ".") or source_module == INJECTED_PACKAGE:
                            for alias in small.names:  # type: ignore[union-attr]
                                name = cst.Module(body=()).code_for_node(alias.name)
                                if name not in provided:
                                    raise TransformError(
                                        f"injected module {INJECTED_PACKAGE}.{mod.name}",
                                        f"imports {name!r} from {source_module}, which the injected code does not define",
                                    )
                            continue
                    if isinstance(small, cst.ImportFrom) and small.relative:
                        raise TransformError(
                            f"injected module {INJECTED_PACKAGE}.{mod.name}",
                            "relative imports cannot be injected",
                        )
                    one_line = cst.SimpleStatementLine(body=[small])
                    for name, source in import_bindings(one_line):
                        if name in defined:
                            raise TransformError(
                                f"import {name}",
                                f"the injected code imports {source} as {name!r}, but the target defines "
                                f"{name!r} itself ({defined[name]})",
                            )
                        if name in imported:
                            if not _same_source(imported[name], source):
                                raise TransformError(
                                    f"import {name}",
                                    f"the target binds {name!r} to {imported[name]}, the injected code "
                                    f"needs {source}",
                                )
                            continue
                        if name in planned:
                            continue
                        planned.add(name)
                        missing.append(small)  # type: ignore[arg-type]
                # One new line per missing import statement, in the injected order.
                for small in dict.fromkeys(missing):
                    needed.append(
                        cst.SimpleStatementLine(body=[_only_missing(small, imported)])
                    )
        return needed

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        body = list(tree.body)
        k = 1 if body and is_docstring(body[0]) else 0
        start = k
        while k < len(body) and is_import_line(body[k]):
            k += 1
        if k == start:
            raise TransformError(ANCHOR, "no import lines at the top of the module; expected the engine's import block")
        needed = self._needed(tree)
        if not needed:
            return tree
        needed[0] = needed[0].with_changes(
            leading_lines=[cst.EmptyLine(), cst.EmptyLine(comment=cst.Comment(COMMENT))]
        )
        return tree.with_changes(body=body[:k] + needed + body[k:])


def _only_missing(small: cst.BaseSmallStatement, imported: dict[str, str]) -> cst.BaseSmallStatement:
    """The import statement without the aliases the target already binds (one line, no parens)."""
    if isinstance(small, cst.Import):
        names = [a for a in small.names if _bound_name(a, False) not in imported]
        names = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in names]
        return cst.Import(names=names)
    assert isinstance(small, cst.ImportFrom)
    names = [a for a in small.names if _bound_name(a, True) not in imported]  # type: ignore[union-attr]
    names = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in names]
    return cst.ImportFrom(module=small.module, names=names, relative=())


def _bound_name(alias: cst.ImportAlias, from_import: bool) -> str:
    code = cst.Module(body=()).code_for_node
    if alias.asname is not None:
        return code(alias.asname.name)
    name = code(alias.name)
    return name if from_import else name.split(".")[0]

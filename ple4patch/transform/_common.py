"""Shared helpers of the transforms: anchors, top-level bindings, the injected module texts."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

import libcst as cst
import libcst.matchers as m

from ..errors import TransformError

# The class every change of the patch hangs on, and the engine modules the patch injects.
NGRAM_CLASS = "Qwen4ExpNGramEmbedding"
INJECTED_MODULES = ("nvfp4_policy", "nvfp4_gather", "nvfp4_host", "nvfp4_loader")  # in injection order
INJECTED_PACKAGE = "ple4patch.kernels"

BLOCK_BEGIN = "# >>> ple4patch: injected NVFP4 row-packed PLE support"
BLOCK_END = "# <<< ple4patch: end of injected NVFP4 row-packed PLE support"


def one(found: list, anchor: str, what: str):
    """The single element of ``found``, or a TransformError naming the anchor."""
    if len(found) != 1:
        state = "not found" if not found else f"found {len(found)} times"
        raise TransformError(anchor, f"{what} {state}; expected exactly once")
    return found[0]


def refuse_lone_cr(source: str) -> None:
    """A line that ends in a lone CR (classic Mac OS line endings): Python reads it as a line
    break, but the patch's lines end in LF, so the output would mix endings. Refused up front,
    naming the cause (LF and CRLF files are patched with their own endings)."""
    at = re.search(r"\r(?!\n)", source)
    if at is not None:
        line = len(re.split(r"\r\n|\r|\n", source[: at.start()]))
        raise TransformError(
            "line endings",
            f"line {line} ends in a lone CR (classic Mac OS line endings), which ple4patch does not "
            "patch (it patches files with LF or CRLF line endings): nothing written",
        )


def dotted(node: cst.BaseExpression | None) -> str:
    """'a.b.c' for a Name/Attribute chain ('' for None)."""
    if node is None:
        return ""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    raise TypeError(f"not a dotted name: {type(node).__name__}")


def import_bindings(stmt: cst.SimpleStatementLine) -> list[tuple[str, str]]:
    """(bound name, source) of an import line: ``import a.b`` binds a -> 'a';
    ``import a.b as x`` binds x -> 'a.b'; ``from ..m import n as k`` binds k -> '..m.n'."""
    out: list[tuple[str, str]] = []
    for small in stmt.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                full = dotted(alias.name)
                if alias.asname is not None:
                    out.append((dotted(alias.asname.name), full))
                else:
                    head = full.split(".")[0]
                    out.append((head, head))
        elif isinstance(small, cst.ImportFrom):
            module = "." * len(small.relative) + dotted(small.module)
            if isinstance(small.names, cst.ImportStar):
                raise TransformError("module imports", f"'from {module} import *' is not supported")
            for alias in small.names:
                name = dotted(alias.name)
                bound = dotted(alias.asname.name) if alias.asname is not None else name
                out.append((bound, f"{module}.{name}" if not module.endswith(".") else module + name))
    return out


def is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def top_level_definitions(module: cst.Module) -> dict[str, str]:
    """Names bound at module level by anything but an import: name -> kind."""
    names: dict[str, str] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            names.setdefault(stmt.name.value, "def")
        elif isinstance(stmt, cst.ClassDef):
            names.setdefault(stmt.name.value, "class")
        elif isinstance(stmt, cst.SimpleStatementLine) and not is_import_line(stmt):
            for small in stmt.body:
                targets: list[cst.BaseExpression] = []
                if isinstance(small, cst.Assign):
                    targets = [t.target for t in small.targets]
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    targets = [small.target]
                for target in targets:
                    for name in m.findall(target, m.Name()):
                        names.setdefault(name.value, "assignment")
    return names


def module_level_names(module: cst.Module) -> set[str]:
    """Every name the module binds at module level, also inside a top-level ``if``/``try``/``with``/
    loop body (``if TYPE_CHECKING:``, ``try: import x``), but not inside a function or class: what
    injected top-level names must not collide with."""
    names: set[str] = set()

    def visit(stmts) -> None:
        block = cst.Module(body=list(stmts))
        names.update(top_level_definitions(block))
        names.update(top_level_imports(block))
        for stmt in stmts:
            if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine)):
                for inner in _inner_blocks(stmt):
                    visit(inner)

    visit(module.body)
    return names


def _inner_blocks(stmt: cst.CSTNode) -> list:
    """The statement lists directly inside a compound statement: each branch of an ``if``, the
    parts of a ``try``, the body and ``else`` of a loop, the body of a ``with``."""
    out, todo = [], [stmt]
    while todo:
        node = todo.pop()
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock):
            out.append(body.body)
        todo += [c for c in (getattr(node, "orelse", None), getattr(node, "finalbody", None)) if c is not None]
        todo += list(getattr(node, "handlers", ()) or ())
    return out


def top_level_imports(module: cst.Module) -> dict[str, str]:
    """Names bound at module level by import lines: name -> source (first binding wins)."""
    bound: dict[str, str] = {}
    for stmt in module.body:
        if is_import_line(stmt):
            for name, source in import_bindings(stmt):
                bound.setdefault(name, source)
    return bound


def find_class(module: cst.Module, name: str = NGRAM_CLASS) -> tuple[int, cst.ClassDef]:
    found = [(i, s) for i, s in enumerate(module.body) if isinstance(s, cst.ClassDef) and s.name.value == name]
    return one(found, f"class {name}", f"top-level class {name}")


def class_methods(cls: cst.ClassDef, name: str) -> list[tuple[int, cst.FunctionDef]]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [(i, s) for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == name]


@dataclass(frozen=True)
class InitSite:
    """``Qwen4ExpNGramEmbedding.__init__`` in a module: its statements, and the module with new ones."""

    class_index: int
    cls: cst.ClassDef
    init_index: int
    init: cst.FunctionDef

    @property
    def statements(self) -> list[cst.BaseStatement]:
        return list(self.init.body.body)  # type: ignore[union-attr]  (an IndentedBlock: see ngram_init)

    def with_statements(self, tree: cst.Module, stmts: list[cst.BaseStatement]) -> cst.Module:
        """``tree`` with ``__init__``'s body replaced by ``stmts``, all else as it was."""
        init = self.init.with_changes(body=self.init.body.with_changes(body=stmts))
        class_body = list(self.cls.body.body)  # type: ignore[union-attr]
        class_body[self.init_index] = init
        cls = self.cls.with_changes(body=self.cls.body.with_changes(body=class_body))
        body = list(tree.body)
        body[self.class_index] = cls
        return tree.with_changes(body=body)


def ngram_init(tree: cst.Module, anchor: str) -> InitSite:
    """The one ``__init__`` of the one top-level ``Qwen4ExpNGramEmbedding``; TransformError(anchor) else."""
    class_index, cls = find_class(tree)
    init_index, init = one(class_methods(cls, "__init__"), anchor, f"method {NGRAM_CLASS}.__init__")
    if not isinstance(init.body, cst.IndentedBlock):
        raise TransformError(anchor, "__init__ has no indented body")
    return InitSite(class_index, cls, init_index, init)


@dataclass(frozen=True)
class InjectedModule:
    """One module of ple4patch.kernels as it is injected: its import lines and its body text."""

    name: str
    imports: tuple[cst.SimpleStatementLine, ...]
    body: str  # the module's text after its docstring and import lines, verbatim
    defines: tuple[str, ...]  # top-level names the body binds


def split_injected(name: str, source: str) -> InjectedModule:
    """Split a kernels module into its import lines and the body that gets injected.

    The module is: an optional docstring, import lines, then definitions. A ``from __future__``
    import or an import line after the first definition would change meaning once injected, so
    they are refused.
    """
    anchor = f"injected module {INJECTED_PACKAGE}.{name}"
    module = cst.parse_module(source)
    stmts = list(module.body)
    k = 1 if stmts and is_docstring(stmts[0]) else 0
    imports: list[cst.SimpleStatementLine] = []
    while k < len(stmts) and is_import_line(stmts[k]):
        imports.append(stmts[k])  # type: ignore[arg-type]
        k += 1
    for stmt in imports:
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and dotted(small.module) == "__future__":
                raise TransformError(anchor, "a 'from __future__' import cannot be injected mid-file")
    for stmt in stmts[k:]:
        if is_import_line(stmt):
            raise TransformError(anchor, "a top-level import after the first definition cannot be injected")
    body_module = module.with_changes(body=stmts[k:], header=())
    body = body_module.code.lstrip("\n")
    if not body.strip():
        raise TransformError(anchor, "the module has no body to inject")
    defines = tuple(top_level_definitions(body_module))
    return InjectedModule(name, tuple(imports), body, defines)


@functools.lru_cache(maxsize=None)
def _read_injected_text(name: str) -> str:
    return resources.files(INJECTED_PACKAGE).joinpath(f"{name}.py").read_text(encoding="utf-8")


def injected_modules() -> tuple[InjectedModule, ...]:
    """The modules of ple4patch.kernels that the patch injects, read from the package files."""
    return tuple(split_injected(name, _read_injected_text(name)) for name in INJECTED_MODULES)

"""The policy patch: ``vllm/platforms/runtime_defaults.py`` lets an NVFP4 request win over automatic PLE placement.

Four changes, one codemod each, in order (``POLICY_TRANSFORMS``), anchored on the engine's own
names (1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6,
``vllm/platforms/runtime_defaults.py``):

1. ``InjectPolicyBlock``: ``ple4patch.kernels.nvfp4_policy`` as one delimited block (with the
   sentinel line) just before ``def apply_runtime_policy_defaults``.
2. ``RefuseConflicts``: ``ple4_policy_check(self, defaults)`` right after
   ``defaults = PolicyDefaults(self)`` in ``apply_runtime_policy_defaults``: an explicit
   conflicting setting stops the start-up there, before any worker or allocation exists.
3. ``SkipAutoDiskPlacement``: the ``if`` that calls ``_apply_sm70_qwen38_disk_ple_defaults``
   gets ``not ple4_policy_skips_auto_placement(self) and (...)``.
4. ``DeclineCascade``: ``_qwen4exp_ple_cascade_requested`` returns False first (its reason
   recorded) for an NVFP4 request.

Changes 3 and 4 apply where the file defines the function they hang on (a release may have one
of them); a defined function whose anchor is not found exactly once is a TransformError.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ..policy_file import AUTO_DISK_FUNCTION, CASCADE_FUNCTION, ENTRY_FUNCTION
from ..sentinel import SENTINEL_PREFIX, find_patch_id, sentinel_line
from ._common import INJECTED_PACKAGE, module_level_names, one, refuse_lone_cr, split_injected

POLICY_MODULE = "nvfp4_policy"
BLOCK_BEGIN = "# >>> ple4patch: injected NVFP4 PLE placement policy"
BLOCK_END = "# <<< ple4patch: end of injected NVFP4 PLE placement policy"

CHECK_FUNCTION = "ple4_policy_check"
CHECK_CALL = f"{CHECK_FUNCTION}(self, defaults)"
SKIP_CALL = "ple4_policy_skips_auto_placement"
DECLINE_CALL = "ple4_policy_declines_cascade"


@functools.lru_cache(maxsize=None)
def _policy_text() -> str:
    return resources.files(INJECTED_PACKAGE).joinpath(f"{POLICY_MODULE}.py").read_text(encoding="utf-8")


def _top_function(tree: cst.Module, name: str) -> tuple[int, cst.FunctionDef]:
    found = [(i, s) for i, s in enumerate(tree.body) if isinstance(s, cst.FunctionDef) and s.name.value == name]
    return one(found, f"def {name}", f"top-level function {name}")


def defines(tree: cst.Module, name: str) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in tree.body)


def _replace_function(tree: cst.Module, index: int, fn: cst.FunctionDef) -> cst.Module:
    body = list(tree.body)
    body[index] = fn
    return tree.with_changes(body=body)


class InjectPolicyBlock(CodemodCommand):
    """Insert ``ple4patch.kernels.nvfp4_policy`` before ``def apply_runtime_policy_defaults``.

    The module has no imports (it is injected verbatim); none of its top-level names may exist
    in the target already. A file of another shape names its anchor in `anchor` (a subclass).
    """

    DESCRIPTION = "Inject the NVFP4 PLE placement rules."

    def anchor(self, tree: cst.Module) -> tuple[int, cst.FunctionDef]:
        """The top-level function the block goes just before."""
        return _top_function(tree, ENTRY_FUNCTION)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        injected = split_injected(POLICY_MODULE, _policy_text())
        if injected.imports:
            raise TransformError(f"injected module {INJECTED_PACKAGE}.{POLICY_MODULE}", "must not import at module level")
        index, fn = self.anchor(tree)
        clashes = sorted(set(injected.defines) & module_level_names(tree))
        if clashes:
            raise TransformError("injected names", f"the target already defines {', '.join(clashes[:5])}; it is patched or foreign")
        text = "\n".join([
            BLOCK_BEGIN + " (generated; `ple4patch revert` restores the original file)",
            sentinel_line(),
            f"# --- from {INJECTED_PACKAGE}.{POLICY_MODULE} ---",
            "",
            "",
            injected.body.rstrip("\n"),
            "",
            "",
            BLOCK_END,
        ])
        parsed = cst.parse_module("__ple4_first__ = None\n" + text + "\n\n\n__ple4_last__ = None\n")
        new = list(parsed.body[1:-1])
        new[0] = new[0].with_changes(leading_lines=[*fn.leading_lines, *new[0].leading_lines])
        body = list(tree.body)
        body[index] = fn.with_changes(leading_lines=parsed.body[-1].leading_lines)
        return tree.with_changes(body=body[:index] + new + body[index:])


_DEFAULTS_ASSIGN = m.SimpleStatementLine(
    body=[m.Assign(targets=[m.AssignTarget(target=m.Name("defaults"))], value=m.Call(func=m.Name("PolicyDefaults")))]
)


class RefuseConflicts(CodemodCommand):
    """``ple4_policy_check(self, defaults)`` after ``defaults = PolicyDefaults(self)``."""

    DESCRIPTION = "Refuse explicit PLE settings that conflict with an NVFP4 request."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        index, fn = _top_function(tree, ENTRY_FUNCTION)
        stmts = list(fn.body.body)  # type: ignore[union-attr]
        at = one([i for i, s in enumerate(stmts) if m.matches(s, _DEFAULTS_ASSIGN)],
                 "defaults = PolicyDefaults(self)", f"the PolicyDefaults assignment in {ENTRY_FUNCTION}")
        stmts.insert(at + 1, cst.parse_statement(CHECK_CALL + "\n"))
        return _replace_function(tree, index, fn.with_changes(body=fn.body.with_changes(body=stmts)))


def _calls_directly(node: cst.If, name: str) -> bool:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    call = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Name(name)))])
    return any(m.matches(s, call) for s in body)


class _GuardIf(cst.CSTTransformer):
    """Every ``if`` whose own body calls one of `callees` gets ``not guard(self) and (...)``
    (once, whichever it calls); `counts` says how many such ``if`` statements call each callee."""

    def __init__(self, callees: str | tuple[str, ...], guard: str) -> None:
        super().__init__()
        self.callees = (callees,) if isinstance(callees, str) else tuple(callees)
        self.guard = guard
        self.counts = dict.fromkeys(self.callees, 0)

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        called = [c for c in self.callees if _calls_directly(original, c)]
        if not called:
            return updated
        for c in called:
            self.counts[c] += 1
        test = updated.test
        if not test.lpar:
            test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        guard = cst.parse_expression(f"not {self.guard}(self)")
        return updated.with_changes(test=cst.BooleanOperation(left=guard, operator=cst.And(), right=test))


class SkipAutoDiskPlacement(CodemodCommand):
    """The ``if`` that calls ``_apply_sm70_qwen38_disk_ple_defaults`` is skipped for NVFP4."""

    DESCRIPTION = "Skip the SM70 Qwen3.8 disk-mmap PLE default for an NVFP4 request."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        index, fn = _top_function(tree, ENTRY_FUNCTION)
        guard = _GuardIf(AUTO_DISK_FUNCTION, SKIP_CALL)
        new = fn.visit(guard)
        if guard.count != 1:
            one([None] * guard.count, f"if ...: {AUTO_DISK_FUNCTION}(...)",
                f"an `if` in {ENTRY_FUNCTION} whose body calls {AUTO_DISK_FUNCTION}")
        return _replace_function(tree, index, new)  # type: ignore[arg-type]


def after_docstring(stmts) -> int:
    """Where a function body's first statement goes: after its docstring, if it has one."""
    return 1 if stmts and m.matches(stmts[0], m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])) else 0


class DeclineCascade(CodemodCommand):
    """``_qwen4exp_ple_cascade_requested`` returns False first for an NVFP4 request."""

    DESCRIPTION = "Decline the PLE disk cascade for an NVFP4 request."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        index, fn = _top_function(tree, CASCADE_FUNCTION)
        params = fn.params.params
        if not params:
            raise TransformError(f"def {CASCADE_FUNCTION}", "takes no config argument")
        cfg = params[0].name.value
        stmts = list(fn.body.body)  # type: ignore[union-attr]
        stmts.insert(after_docstring(stmts), cst.parse_statement(f"if {DECLINE_CALL}({cfg}):\n    return False\n"))
        return _replace_function(tree, index, fn.with_changes(body=fn.body.with_changes(body=stmts)))


def policy_transforms(tree: cst.Module) -> tuple[type[CodemodCommand], ...]:
    """The changes this file takes: the block and the check always, the others where the file
    defines the function they hang on (neither: not a policy file ple4patch patches)."""
    out: list[type[CodemodCommand]] = [InjectPolicyBlock, RefuseConflicts]
    if defines(tree, AUTO_DISK_FUNCTION):
        out.append(SkipAutoDiskPlacement)
    if defines(tree, CASCADE_FUNCTION):
        out.append(DeclineCascade)
    if len(out) == 2:
        raise TransformError(
            f"def {AUTO_DISK_FUNCTION} / def {CASCADE_FUNCTION}",
            "neither function is defined: this policy file places no PLE table automatically",
        )
    return tuple(out)


def parse_unpatched(source: str) -> cst.Module:
    """The front checks of a placement file's patch: text ple4patch may patch (no lone CR), not
    patched already (no sentinel, no injected block), and Python that parses."""
    refuse_lone_cr(source)
    patch_id = find_patch_id(source)
    if patch_id is not None:
        raise TransformError("sentinel", f"the file is already patched (patch-id={patch_id}); revert it first")
    if BLOCK_BEGIN in source or SENTINEL_PREFIX in source:
        raise TransformError("sentinel", "the file carries a ple4patch block without a valid sentinel line; restore the original")
    try:
        tree = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise TransformError("module", f"does not parse as Python: {str(exc).splitlines()[0]}") from None
    return tree


def run_transforms(tree: cst.Module, transforms, filename: str) -> str:
    """Every transform in order, then the checks on the output: the sentinel line exactly once,
    and the text compiles."""
    context = CodemodContext()
    for transform in transforms:
        tree = transform(context).transform_module_impl(tree)
    out = tree.code
    if len(re.findall(r"^" + re.escape(sentinel_line()) + r"\s*$", out, flags=re.MULTILINE)) != 1:
        raise TransformError("sentinel", "the patched text does not carry the sentinel line exactly once")
    try:
        compile(out, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TransformError("output", f"the patched text does not compile: {exc}") from None
    return out


def patch_policy_source(source: str) -> str:
    """The patched text of ``runtime_defaults.py``, or a TransformError; never partial."""
    tree = parse_unpatched(source)
    return run_transforms(tree, policy_transforms(tree), "runtime_defaults.py")

"""The config patch: ``vllm/config/vllm.py`` refuses settings that conflict with an NVFP4 request and skips its automatic PLE placement for it.

Releases before the start-up policy file place the PLE table from the VllmConfig module
(ChainZeaxion/1Cat-vLLM ebeb346a66d5d485d71fb2fc4079c8b891dd9250, ``vllm/config/vllm.py``:
``_apply_sm70_qwen38_hybrid_ple_defaults`` at lines 303-312 writes the three PLE variables into
``os.environ``; ``VllmConfig.__post_init__`` calls it at line 2149, inside an ``if`` at lines
2127-2148; the cascade admission ``_qwen4exp_ple_cascade_requested`` is at lines 322-390 and is
asked at line 2458). Four changes, one codemod each, in order (``config_transforms``):

1. ``InjectConfigBlock``: ``ple4patch.kernels.nvfp4_policy`` as one delimited block (with the
   sentinel line) just before the first module-level ``def`` of the placement functions
   (`policy_file.CONFIG_FUNCTIONS`).
2. ``RefuseConfigConflicts``: ``ple4_policy_check(self)`` as the first statement of
   ``VllmConfig.__post_init__`` (after its docstring): an explicit setting that conflicts with an
   NVFP4 request stops the start-up in the process that builds the config (the front end of
   ``vllm serve``, whose command line carries an explicit cascade), before any worker exists.
   These releases have no ``PolicyDefaults``, so an explicit setting is one in ``os.environ``;
   nothing in ``__post_init__`` has written one yet.
3. ``SkipConfigDefaults``: in ``VllmConfig.__post_init__``, every ``if`` whose own body calls
   one of the default functions (`policy_file.CONFIG_DEFAULTS`) gets
   ``not ple4_policy_skips_auto_placement(self) and (...)``; each default the module defines is
   guarded exactly once.
4. ``DeclineCascade`` (the policy patch's): ``_qwen4exp_ple_cascade_requested`` returns False
   first for an NVFP4 request, where the module defines it.

A missing anchor is a TransformError naming it; nothing is partial.
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodCommand

from ..errors import TransformError
from ..policy_file import CASCADE_FUNCTION, CONFIG_DEFAULTS, CONFIG_FUNCTIONS
from ._common import one
from .policy import (CHECK_FUNCTION, SKIP_CALL, DeclineCascade, InjectPolicyBlock, _GuardIf, after_docstring, defines,
                     parse_unpatched, run_transforms)

CONFIG_CLASS = "VllmConfig"
POST_INIT = "__post_init__"


class InjectConfigBlock(InjectPolicyBlock):
    """Insert ``ple4patch.kernels.nvfp4_policy`` before the first placement function's ``def``."""

    DESCRIPTION = "Inject the NVFP4 PLE placement rules into the VllmConfig module."

    def anchor(self, tree: cst.Module) -> tuple[int, cst.FunctionDef]:
        found = [(i, s) for i, s in enumerate(tree.body)
                 if isinstance(s, cst.FunctionDef) and s.name.value in CONFIG_FUNCTIONS]
        if not found:
            raise TransformError("placement function",
                                 f"no top-level def of {', '.join(CONFIG_FUNCTIONS)} found; expected at least one")
        return found[0]


def _post_init(tree: cst.Module) -> tuple[int, cst.ClassDef, int, cst.FunctionDef]:
    """``class VllmConfig`` (top level, once) and its ``def __post_init__`` (once)."""
    index, cls = one([(i, s) for i, s in enumerate(tree.body) if isinstance(s, cst.ClassDef)
                      and s.name.value == CONFIG_CLASS], f"class {CONFIG_CLASS}", f"top-level class {CONFIG_CLASS}")
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    at, fn = one([(i, s) for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == POST_INIT],
                 f"def {POST_INIT}", f"{CONFIG_CLASS}.{POST_INIT}")
    return index, cls, at, fn


def _with_post_init(tree: cst.Module, index: int, cls: cst.ClassDef, at: int, fn: cst.FunctionDef) -> cst.Module:
    """`tree` with ``VllmConfig.__post_init__`` (found by `_post_init`) replaced by `fn`."""
    stmts = list(cls.body.body)  # type: ignore[union-attr]
    stmts[at] = fn
    body = list(tree.body)
    body[index] = cls.with_changes(body=cls.body.with_changes(body=stmts))
    return tree.with_changes(body=body)


class RefuseConfigConflicts(CodemodCommand):
    """``ple4_policy_check(self)`` first in ``VllmConfig.__post_init__`` (after a docstring)."""

    DESCRIPTION = "Refuse explicit PLE settings that conflict with an NVFP4 request."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        index, cls, at, fn = _post_init(tree)
        if not fn.params.params or fn.params.params[0].name.value != "self":
            raise TransformError(f"def {POST_INIT}", f"{CONFIG_CLASS}.{POST_INIT} does not take self first")
        if not isinstance(fn.body, cst.IndentedBlock):
            raise TransformError(f"def {POST_INIT}", f"{CONFIG_CLASS}.{POST_INIT} has no indented body")
        stmts = list(fn.body.body)
        stmts.insert(after_docstring(stmts), cst.parse_statement(f"{CHECK_FUNCTION}(self)\n"))
        return _with_post_init(tree, index, cls, at, fn.with_changes(body=fn.body.with_changes(body=stmts)))


class SkipConfigDefaults(CodemodCommand):
    """Each ``if`` of ``VllmConfig.__post_init__`` that calls a PLE default is skipped for NVFP4."""

    DESCRIPTION = "Skip the SM70 Qwen3.8 PLE defaults of VllmConfig for an NVFP4 request."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        wanted = tuple(name for name in CONFIG_DEFAULTS if defines(tree, name))
        if not wanted:
            raise TransformError("default function", f"none of {', '.join(CONFIG_DEFAULTS)} is defined")
        index, cls, at, fn = _post_init(tree)
        guard = _GuardIf(wanted, SKIP_CALL)
        new_fn = fn.visit(guard)
        for name in wanted:
            one([None] * guard.counts[name], f"if ...: {name}(...)",
                f"an `if` in {CONFIG_CLASS}.{POST_INIT} whose body calls {name}")
        return _with_post_init(tree, index, cls, at, new_fn)


def config_transforms(tree: cst.Module) -> tuple[type[CodemodCommand], ...]:
    """The changes this module takes: the block, the check and the defaults' guard always (a
    module without a default function is not one ple4patch patches), the cascade where it is
    defined."""
    out: list[type[CodemodCommand]] = [InjectConfigBlock, RefuseConfigConflicts, SkipConfigDefaults]
    if defines(tree, CASCADE_FUNCTION):
        out.append(DeclineCascade)
    return tuple(out)


def patch_config_source(source: str) -> str:
    """The patched text of ``vllm/config/vllm.py``, or a TransformError; never partial."""
    tree = parse_unpatched(source)
    return run_transforms(tree, config_transforms(tree), "vllm.py")

"""Check (changes nothing): the target's engine version has the facilities the injected code uses.

The injected loader imports a few engine modules that only some 1Cat-vLLM versions have. A
version whose ``ple_layer.py`` is built without one of them cannot host the loader: the patched
file would fail at import, or run without the check the module provides. Such a file is refused
with a TransformError naming the facility (the pipeline runs this check on the original text,
after the structural transforms, so a missing structural anchor is reported first).

Known case: ``vllm/models/qwen4_exp/nvidia/ple_layer.py`` of 1CatAI/1Cat-vLLM at commit
45d0a3bbba81ef9b0e9f09b9b092239984847e01 (tests/data/engines/main-45d0a3bb) builds its PLE table
without ``vllm.model_executor.layers.ple_offload_layer``; every other known version imports
``PleOffloadLayer`` and ``is_offload_process`` from it.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext

from ..errors import TransformError
from ._common import InjectedModule, dotted, is_import_line

ANCHOR = "engine facilities"

# Engine modules that exist only in some engine versions -> what they are, in a user's words.
# A module the injected code imports must be imported by the target too when it is listed here.
VERSION_SPECIFIC_MODULES = {
    "vllm.model_executor.layers.ple_offload_layer": (
        "the PLE CPU-offload layer (PleOffloadLayer, is_offload_process)"
    ),
}


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


class RequireEngineFacilities(CodemodCommand):
    """Refuse a target that does not import an engine module the injected code needs and that
    only some engine versions have (``VERSION_SPECIFIC_MODULES``). Changes nothing.

    Anchor: for each such module imported by the injected code, a top-level import of it in the
    target.
    """

    DESCRIPTION = "Check that the engine version can host the NVFP4 PLE loader."

    def __init__(self, context: CodemodContext, injected: Sequence[InjectedModule]) -> None:
        super().__init__(context)
        self.injected = tuple(injected)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        needed = _modules_imported([s for mod in self.injected for s in mod.imports])
        have = _modules_imported(tree.body)
        lacking = [name for name in VERSION_SPECIFIC_MODULES if name in needed and name not in have]
        if lacking:
            what = "; ".join(f"{name}, {VERSION_SPECIFIC_MODULES[name]}," for name in lacking)
            raise TransformError(
                ANCHOR,
                f"this engine version's ple_layer.py is built without {what} which the NVFP4 "
                "loader needs: this 1cat-vllm version cannot host it (nothing was changed); "
                "use a 1cat-vllm version whose PLE layer imports it",
            )
        return tree

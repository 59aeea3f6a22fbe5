"""`ple4patch status`: report the target's state, hashes and backup (reads only; fast)."""

from __future__ import annotations

import os

from .. import manifest as manifest_mod
from .. import bytecode, render
from ..engine import find_engine
from ..errors import EXIT_ENGINE_NOT_FOUND, EXIT_OK, EngineNotFound
from ..manifest import Manifest
from ..result import Result, error_object
from ..state import State, assess


def run(venv: str | os.PathLike | None = None, *, manifest: Manifest | None = None) -> Result:
    """Report the state; exit 0 when the target exists, 3 when no engine/target."""
    try:
        engine = find_engine(venv)
    except EngineNotFound as err:
        return Result(
            "status",
            EXIT_ENGINE_NOT_FOUND,
            f"state:   not installed: {err}",
            {"state": State.NOT_INSTALLED.value, "reason": getattr(err, "reason", None), "error": error_object(err)},
        )
    a = assess(engine, manifest_mod.for_target(manifest, engine.target))
    inside = engine.inside_problem()
    if inside:
        a.notes.append(inside)
    for pyc in bytecode.unchecked_stale_pycache(engine.target):
        fix = (f"; `ple4patch apply {engine.venv}` removes it" if a.state in (State.PATCHED, State.PRISTINE)
               else "")
        a.notes.append(f"{pyc} is an unchecked-hash pyc of other bytes: Python would run it instead of the "
                       f"file{fix}")
    if a.state is State.MISSING:
        try:
            engine.require_target()
        except EngineNotFound as err:
            return Result(
                "status",
                EXIT_ENGINE_NOT_FOUND,
                render.status_text(a) + f"\nerror:   {err}",
                {**render.report(a), "reason": "target_missing", "error": error_object(err)},
            )
    return Result("status", EXIT_OK, render.status_text(a), render.report(a))

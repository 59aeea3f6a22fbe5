"""`ple4patch status`: report the state, hashes and backup of every file of the set (reads only; fast)."""

from __future__ import annotations

import os

from .. import bytecode, render, set_report, shell, write
from .. import manifest as manifest_mod
from ..engine import find_engine
from ..errors import EXIT_ENGINE_NOT_FOUND, EXIT_OK, EngineNotFound
from ..fileset import assess_set
from ..manifest import Manifest
from ..result import Result, error_object
from ..state import State


def run(venv: str | os.PathLike | None = None, *, manifest: Manifest | None = None) -> Result:
    """Report the state; exit 0 when the target exists, 3 when no engine/target. The Result's
    `output` is the details, its `message` the verdict (state, notes, next step)."""
    try:
        engine = find_engine(venv)
    except EngineNotFound as err:
        return Result(
            "status",
            EXIT_ENGINE_NOT_FOUND,
            f"state:   not installed: {err}",
            {"state": State.NOT_INSTALLED.value, "reason": getattr(err, "reason", None), "error": error_object(err)},
        )
    s = assess_set(engine, write.with_local_pins(manifest if manifest is not None else manifest_mod.load(), engine))
    inside = engine.inside_problem()
    if inside:
        s.layer.notes.append(inside)
    for a in s.files:
        for pyc in bytecode.unchecked_stale_pycache(a.target):
            fix = (f"; `{shell.ple4patch('apply', engine.venv)}` removes it" if a.state in (State.PATCHED, State.PRISTINE)
                   else "")
            a.notes.append(f"{pyc} is an unchecked-hash pyc of other bytes: Python would run it instead of the "
                           f"file{fix}")
    if s.layer.state is State.MISSING:
        try:
            engine.require_target()
        except EngineNotFound as err:
            return Result(
                "status",
                EXIT_ENGINE_NOT_FOUND,
                "\n".join(render.status_verdict(s.layer) + [f"error:   {err}"]),
                {**set_report.report(s), "reason": "target_missing", "error": error_object(err)},
                output="\n".join(render.status_body(s.layer)) + "\n",
            )
    body, verdict = set_report.status_parts(s)
    return Result("status", EXIT_OK, verdict, set_report.report(s), output=body + "\n")

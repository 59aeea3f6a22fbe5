"""``inspect --venv``: whether that venv's engine is patched, and so which layouts it reads."""

from __future__ import annotations

import os
from typing import Any

from .. import shell
from ..errors import Ple4Error, UsageError
from .layout import PATCHED_ENGINE_READS, STOCK_ENGINE_READS
from .problem import Problem
from .table import TableReport


def _state(eng, judge_set) -> tuple[str | None, str | None, str, object]:
    """(state, patch id, how it was found, the set's judgement or None) of the venv's target.
    `judge_set(eng)`: (the set's assessment, its next step as `ple4patch status` gives it)."""
    from ..sentinel import find_patch_id

    try:
        if judge_set is not None:
            judged = judge_set(eng)
            assessment = judged[0].layer
        else:
            from .. import manifest, state as state_mod

            judged, assessment = None, state_mod.assess(eng, manifest.with_local(manifest.load(), eng.target))
        patch_id = assessment.patch_id
        if patch_id is None and assessment.current_bytes is not None:
            patch_id = find_patch_id(assessment.current_bytes.decode("utf-8", errors="replace"))
        return assessment.state.value, patch_id, "state.assess", judged
    except Ple4Error:  # e.g. an unreadable manifest: fall back to the sentinel alone
        try:
            text = eng.target.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(f"cannot read {eng.target}: {exc.strerror or exc}") from None
        patch_id = find_patch_id(text)
        return ("patched" if patch_id else "unpatched"), patch_id, "sentinel", None


# The host-budget helpers the patched loader looks up in ple_layer.py's namespace
# (ple4patch.kernels.nvfp4_loader._ple4_host_budget), by what the release defines or imports.
_BUDGET_NAMES = ("ple_host_budget_bytes", "_ple_host_budget_bytes")
_FAIR_SHARE_NAMES = (("cap_host_budget_bytes",), ("available_host_bytes",), ("total_host_bytes",),
                     ("ple_host_reserve_bytes", "_ple_host_reserve_bytes"))


# Names of the releases that register the FP8 table's host rows exactly instead of pinning them
# with torch.empty(pin_memory=True): `_ple_pinned_host_empty` (cudaHostRegister) at
# cookys/1Cat-vLLM 1b5731f903c980d5e11019be3154e8b7ebc8a35d, `allocate_host_table` (from
# `.exact_pin`) at Qixiao02/1Cat-vLLM 0aac941e5e107a12953ac232a064b429ab9a0275.
_EXACT_FP8_PIN_NAMES = ("_ple_pinned_host_empty", "allocate_host_table")


def fp8_pin_rule(text: str) -> str:
    """How this ``ple_layer.py`` (without ple4patch's injected code) pins an FP8 table's host
    rows: ``placement.PIN_PAGE`` when it registers them exactly, else
    ``placement.PIN_POWER_OF_TWO`` (torch's caching host allocator, as 1CatAI/1Cat-vLLM 036318a0
    and 15a8d185 and rapatel0/1Cat-vLLM a223f046 do)."""
    import re

    from .placement import PIN_PAGE, PIN_POWER_OF_TWO

    if any(re.search(rf"\b{name}\b", text) for name in _EXACT_FP8_PIN_NAMES):
        return PIN_PAGE
    return PIN_POWER_OF_TWO


def _target_text(eng) -> str | None:
    """The venv's ``ple_layer.py`` as its release wrote it (ple4patch's injected code removed)."""
    from ..readfile import read_regular

    try:
        from ..sentinel import strip_injected

        return strip_injected(read_regular(eng.target).decode("utf-8", errors="replace"))
    except (OSError, Ple4Error):
        return None


def host_budget_rule(text: str) -> str:
    """How the patched loader places the table for this ``ple_layer.py``: ``"fair_share"`` (a
    budget from VLLM_QWEN4EXP_PLE_HOST_GIB, else the rank's fair share of host memory: 036318a0,
    15a8d185), ``"configured"`` (the variable only: Zyx-A 52fa42ff) or ``"none"`` (no host budget:
    the whole share in host memory, a223f046)."""
    import re

    def has(name: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", text) is not None

    if not any(has(n) for n in _BUDGET_NAMES):
        return "none"
    if all(any(has(n) for n in names) for names in _FAIR_SHARE_NAMES):
        return "fair_share"
    return "configured"


# What the engine reads, by the state of its ``ple_layer.py``: the file as the engine ships it
# reads FP8 ("unpatched": no sentinel, when no manifest could be read), the file as ple4patch made
# it reads the NVFP4 layouts too. Any other file (``modified``: edited by hand, patched by a build
# ple4patch does not know, or not even Python) reads nothing ple4patch can vouch for.
SHIPPED_STATES = ("pristine", "unpinned", "unpatched")
MADE_STATES = ("patched", "patched_older")
UNKNOWN_READS = "not the file the engine ships, nor one ple4patch made"


def engine_reads(state: str | None) -> list[str]:
    """The layouts an engine whose ``ple_layer.py`` is in `state` reads ([]: not known)."""
    if state in MADE_STATES:
        return list(PATCHED_ENGINE_READS)
    if state in SHIPPED_STATES:
        return list(STOCK_ENGINE_READS)
    return []


def venv_engine(venv: str | os.PathLike[str], tables: list[TableReport],
                judge_set=None) -> tuple[dict[str, Any], list[Problem], list[Problem]]:
    """The venv's engine state and the layouts it reads. EngineNotFound propagates (exit 3).
    What the engine reads is its ``ple_layer.py``'s; the state shown and the next step are the
    patch set's (`judge_set(eng)`: the set's assessment and its next step, as ``ple4patch
    status`` gives them; the command passes it in from the layers above), else the layer's."""
    from .. import engine as engine_mod

    eng = engine_mod.find_engine(venv)
    eng.require_target()
    state, patch_id, how, judged = _state(eng, judge_set)
    reads = engine_reads(state)
    apply = shell.ple4patch("apply", *(["--allow-unknown"] if state == "unpinned" else []), eng.venv)
    set_state, step = (judged[0].state, judged[1]) if judged is not None else (state, None)
    whole = judged is None or len(judged[0].files) == 1
    what = state if whole else f"{state}; its patch set {set_state}"
    todo = f"next: {step}" if step else f"run `{apply}`"
    problems: list[Problem] = []
    warnings: list[Problem] = []
    layouts = sorted({t.layout for t in tables})
    can_read = all(layout in reads for layout in layouts) if layouts else None
    if layouts and not reads:
        then = "" if set(layouts) <= set(STOCK_ENGINE_READS) else f", then `{shell.ple4patch('apply', eng.venv)}`"
        problems.append(
            Problem(
                "engine",
                f"the engine in {eng.venv} is {state} ({UNKNOWN_READS}): ple4patch cannot tell which layouts "
                f"it reads: reinstall the engine ({engine_mod.reinstall_hint(eng)}){then}",
                file=str(eng.target),
                expected="the file as the engine ships it, or as ple4patch patches it",
                says_expected=True,
            )
        )
        layouts = []  # the one problem above covers every layout
    for layout in layouts:
        if layout in reads or layout not in PATCHED_ENGINE_READS:
            continue  # unreadable layouts are reported by the table checks already
        problems.append(
            Problem(
                "engine",
                f"the engine in {eng.venv} is not patched ({what}) and reads only "
                f"{', '.join(reads)}; {todo}",
                file=str(eng.target),
                expected=f"an engine that reads {layout}",
            )
        )
    if state == "patched_older":
        update = f"next: {step}" if step else f"`{shell.ple4patch('apply', eng.venv)}` updates it"
        warnings.append(Problem("engine", f"the engine is patched by an older ple4patch ({patch_id}); {update}",
                                file=str(eng.target)))
    elif state in MADE_STATES and set_state != state and step:
        # the layer reads the table, but the rest of the set is not patched with it
        files = ", ".join(f"{rel} {a.state.value}" for rel, a in zip(judged[0].rels, judged[0].files))
        warnings.append(Problem("engine", f"the engine's patch set is not one state ({files}); next: {step}",
                                file=str(eng.target)))
    text = _target_text(eng)
    info = {
        "venv": str(eng.venv),
        "version": eng.version,
        "target": str(eng.target),
        "state": state,
        "set_state": set_state,
        "set_files": None if judged is None else judged[0].rels,
        "next_step": step,
        "patch_id": patch_id,
        "state_from": how,
        "reads": reads,
        "can_read": can_read,
        "host_budget_rule": None if text is None else host_budget_rule(text),
        "fp8_pin_rule": None if text is None else fp8_pin_rule(text),
    }
    return info, problems, warnings

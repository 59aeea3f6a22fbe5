"""Where a release places the PLE table by itself at start-up: the functions, by their names.

Two eras of 1Cat-vLLM, told apart by the module-level ``def`` lines of the text, read with
the standard tokenizer so that a string showing one is not counted (no libcst: ``status`` uses
them):

- The start-up policy file ``vllm/platforms/runtime_defaults.py`` (1CatAI/1Cat-vLLM
  51c0f97201a70a644a80ac21d292a15eff0dc4e6) holds ``apply_runtime_policy_defaults``, which calls
  ``_apply_sm70_qwen38_disk_ple_defaults`` (the SM70 Qwen3.8 disk-mmap PLE default), and
  ``_qwen4exp_ple_cascade_requested`` (the disk cascade admission). ple4patch patches that file
  (`places_ple`); a policy file without the entry point, or without both placement functions,
  places nothing, and the release's patch set is ``ple_layer.py`` alone.
- Earlier releases place the table from the VllmConfig module ``vllm/config/vllm.py``
  (`config_placement`); ple4patch patches it where it defines one of the default functions
  (`config_places_ple`). It changes with almost every commit: ple4patch pins the one real
  main-branch copy it has (1CatAI/1Cat-vLLM 72d8b4d711dcd4ec66e4520bdd9d2194f193a547, with
  ``_apply_sm70_qwen38_disk_ple_defaults``), and a set with any other copy is applied with
  ``--allow-unknown``. ChainZeaxion/1Cat-vLLM ebeb346a66d5d485d71fb2fc4079c8b891dd9250
  (the commit of the corpus file fork-chainzeaxion-ebeb346a), ``vllm/config/vllm.py``:
  ``_apply_sm70_qwen38_hybrid_ple_defaults(parallel_config)`` (lines 303-312) writes
  ``VLLM_SM70_QWEN38_HYBRID_PLE=1``, ``VLLM_PLE_CPU_OFFLOAD=1`` and ``VLLM_PLE_DISK_OFFLOAD=1``
  into ``os.environ``; ``VllmConfig.__post_init__`` calls it (lines 2127-2149) on the SM70
  Flash-V100 lane for a Qwen4Exp FP16 model in the dual-compile lane, pipeline parallel 1,
  unless ``any(name in os.environ for name in (...the three...))`` (lines 2140-2147): a
  variable that is set, whatever its value, skips it. abcd19886/1Cat-vLLM
  0e4384eca1e265e3237a79ec844df92623f3aff6 and Peuqui/1Cat-vLLM
  0f5805798f9d09315e2043ebc16de311a90f187d have the same function and the same rule. Another
  form, ``_apply_sm70_qwen38_disk_ple_defaults(parallel_config)`` imported from
  ``vllm.config.vllm`` by a 1Cat-vLLM test (``tests/compile/test_sm70_decode_graph.py``, one of
  its stored versions), writes ``VLLM_SM70_QWEN38_HYBRID_PLE=0`` and the other two as ``1``.
  The cascade there, ``_qwen4exp_ple_cascade_requested`` (ebeb346a lines 322-390), admits only
  FP8 storage (``_get_ple_embedding_quant_method`` of ``ple_layer.py`` returns None for any
  other, lines 371-387: "checkpoint metadata does not provide raw E4M3 PLE storage"), and
  Peuqui's runs only when ``VLLM_QWEN4EXP_PLE_DISK`` asks for it; neither takes an NVFP4 table
  by itself.
"""

from __future__ import annotations

import io
import re
import tokenize

ENTRY_FUNCTION = "apply_runtime_policy_defaults"
AUTO_DISK_FUNCTION = "_apply_sm70_qwen38_disk_ple_defaults"
CASCADE_FUNCTION = "_qwen4exp_ple_cascade_requested"
HYBRID_FUNCTION = "_apply_sm70_qwen38_hybrid_ple_defaults"

# vllm/config/vllm.py's automatic placement: each default function and what it writes into
# os.environ (ChainZeaxion ebeb346a lines 303-312 for the hybrid one).
CONFIG_DEFAULTS = {
    HYBRID_FUNCTION: (("VLLM_SM70_QWEN38_HYBRID_PLE", "1"), ("VLLM_PLE_CPU_OFFLOAD", "1"),
                      ("VLLM_PLE_DISK_OFFLOAD", "1")),
    AUTO_DISK_FUNCTION: (("VLLM_SM70_QWEN38_HYBRID_PLE", "0"), ("VLLM_PLE_CPU_OFFLOAD", "1"),
                         ("VLLM_PLE_DISK_OFFLOAD", "1")),
}
CONFIG_FUNCTIONS = (HYBRID_FUNCTION, AUTO_DISK_FUNCTION, CASCADE_FUNCTION)
# Any of these in the environment of `vllm serve`, set to any value, skips the default
# (`name in os.environ`, ebeb346a lines 2140-2147); the one to set is the first that the
# NVFP4 table also needs off.
CONFIG_SKIPPED_BY = ("VLLM_SM70_QWEN38_HYBRID_PLE", "VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD")
CONFIG_SKIP = ("VLLM_PLE_CPU_OFFLOAD", "0")
# How the cascade of vllm/config/vllm.py is asked for: by a variable (Peuqui 0f580579), or on by
# default and decided by the checkpoint's storage (ChainZeaxion ebeb346a).
CASCADE_SWITCH = "VLLM_QWEN4EXP_PLE_DISK"
CASCADE_STORAGE_CHECK = "_get_ple_embedding_quant_method"


def _module_defs(text: str) -> frozenset[str] | None:
    """The names of the functions defined at module level (a ``def`` at column 0, outside any
    string), or None when the text does not tokenize (then `_defines` falls back to lines)."""
    names = set()
    after_def = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if after_def and tok.type == tokenize.NAME:
                names.add(tok.string)
            after_def = tok.type == tokenize.NAME and tok.string == "def" and tok.start[1] == 0
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return frozenset(names)


def _defines(text: str, name: str, defs: frozenset[str] | None = None) -> bool:
    """Whether `name` is a module-level function of the text: a ``def`` at column 0 that is code,
    not the text of a docstring or another string."""
    if defs is None:
        defs = _module_defs(text)
    if defs is not None:
        return name in defs
    return re.search(rf"^def {re.escape(name)}\(", text, re.MULTILINE) is not None


def _body(text: str, name: str) -> str:
    """The text of module-level function `name`: from its `def` to the next module-level line."""
    m = re.search(rf"^def {re.escape(name)}\(.*?(?=^[^\s#)]|\Z)", text, re.MULTILINE | re.DOTALL)
    return m.group(0) if m else ""


def places_ple(text: str) -> bool:
    """Whether a policy file's text defines the entry point and a PLE placement function."""
    defs = _module_defs(text)
    return _defines(text, ENTRY_FUNCTION, defs) and (
        _defines(text, AUTO_DISK_FUNCTION, defs) or _defines(text, CASCADE_FUNCTION, defs))


def config_placement(text: str) -> tuple[str, ...]:
    """The placement functions a ``vllm/config/vllm.py`` defines at module level, in the order of
    `CONFIG_FUNCTIONS` (empty: that module places no PLE table)."""
    defs = _module_defs(text)
    return tuple(name for name in CONFIG_FUNCTIONS if _defines(text, name, defs))


def config_places_ple(text: str) -> bool:
    """Whether a ``vllm/config/vllm.py`` defines a default that writes the PLE variables into
    os.environ (`CONFIG_DEFAULTS`): then it joins the patch set. The cascade alone does not take
    an NVFP4 table by itself (see the module docstring), so it does not make the file a member."""
    defs = _module_defs(text)
    return any(_defines(text, name, defs) for name in CONFIG_DEFAULTS)


def config_cascade_form(text: str) -> str | None:
    """How the cascade of a ``vllm/config/vllm.py`` is admitted: ``"switch"`` (only when
    `CASCADE_SWITCH` is set), ``"storage"`` (on by default, FP8 storage only), ``"unknown"``
    (defined, neither form), or None (no cascade function)."""
    body = _body(text, CASCADE_FUNCTION)
    if not body:
        return None
    if CASCADE_SWITCH in body:
        return "switch"
    return "storage" if CASCADE_STORAGE_CHECK in body else "unknown"

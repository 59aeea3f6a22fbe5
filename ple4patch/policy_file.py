"""The engine's start-up policy file: which functions ple4patch's policy patch hangs on.

``vllm/platforms/runtime_defaults.py`` (1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6)
holds ``apply_runtime_policy_defaults``, which calls ``_apply_sm70_qwen38_disk_ple_defaults``
(the SM70 Qwen3.8 disk-mmap PLE default), and ``_qwen4exp_ple_cascade_requested`` (the disk
cascade admission). A release whose file lacks the entry point, or both placement functions,
places no PLE table automatically: its patch set is ``ple_layer.py`` alone. Plain text checks,
no libcst: ``status`` uses them.
"""

from __future__ import annotations

import re

ENTRY_FUNCTION = "apply_runtime_policy_defaults"
AUTO_DISK_FUNCTION = "_apply_sm70_qwen38_disk_ple_defaults"
CASCADE_FUNCTION = "_qwen4exp_ple_cascade_requested"


def _defines(text: str, name: str) -> bool:
    return re.search(rf"^def {re.escape(name)}\(", text, re.MULTILINE) is not None


def places_ple(text: str) -> bool:
    """Whether a policy file's text defines the entry point and a PLE placement function."""
    return _defines(text, ENTRY_FUNCTION) and (_defines(text, AUTO_DISK_FUNCTION) or _defines(text, CASCADE_FUNCTION))

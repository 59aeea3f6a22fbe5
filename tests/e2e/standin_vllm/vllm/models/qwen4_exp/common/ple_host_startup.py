"""Stand-in of the PLE host-pinning pacing options of cookys' fork.

Mirrors vllm/models/qwen4_exp/common/ple_host_startup.py of cookys/1Cat-vLLM (a fork of
1CatAI/1Cat-vLLM; its ple_layer.py at 1b5731f903c980d5e11019be3154e8b7ebc8a35d imports
``PinStartupOptions`` and ``pin_startup_guard``). The public index holds the module at
3e1030cd1c50a7b5fc2dff24088395328fe5adbe, not at 1b5731f9. ``PinStartupOptions`` is a frozen
dataclass (serialize, drop_cache, lock_path, timeout_s, pause_s) whose ``from_env()`` reads the
``VLLM_QWEN4EXP_PLE_PIN_*`` variables (SERIALIZE and DROP_CACHE must be 0 or 1, TIMEOUT_S finite
and positive, PAUSE_MS finite and non-negative, else ValueError); ``pin_startup_guard(options,
model_path)`` is a context manager held around the host table's allocation. The host-local lock
file and the page-cache advice it takes are not reproduced (the tests run no paced start-up);
the pause after the allocation is.
"""

import math
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

_PREFIX = "VLLM_QWEN4EXP_PLE_PIN_"


def _env(name, default):
    return os.getenv(_PREFIX + name, default)


def _zero_or_one(name):
    value = _env(name, "0")
    if value in ("0", "1"):
        return value == "1"
    raise ValueError(f"{_PREFIX + name} must be 0 or 1")


@dataclass(frozen=True)
class PinStartupOptions:
    serialize: bool = False
    drop_cache: bool = False
    lock_path: str = ""
    timeout_s: float = 600.0
    pause_s: float = 0.0

    @classmethod
    def from_env(cls):
        timeout_s = float(_env("TIMEOUT_S", "600"))
        pause_s = float(_env("PAUSE_MS", "0")) / 1000.0
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError("PLE pin timeout must be finite and positive")
        if not (math.isfinite(pause_s) and pause_s >= 0):
            raise ValueError("PLE pin pause must be finite and non-negative")
        default_lock = os.path.join(tempfile.gettempdir(), f"vllm-ple-pin-{os.getuid()}.lock")
        return cls(_zero_or_one("SERIALIZE"), _zero_or_one("DROP_CACHE"), _env("LOCK_PATH", default_lock),
                   timeout_s, pause_s)


@contextmanager
def pin_startup_guard(options, model_path):
    try:
        yield
    finally:
        if options.pause_s:
            time.sleep(options.pause_s)

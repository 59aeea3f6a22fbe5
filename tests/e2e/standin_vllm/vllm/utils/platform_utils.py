"""Stand-in: whether pinned memory is available is a test knob.

Mirrors vllm/utils/platform_utils.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

from vllm import _standin


def is_pin_memory_available() -> bool:
    return _standin.pin_memory_available

"""Stand-in: whether pinned memory is available is a test knob."""

from vllm import _standin


def is_pin_memory_available() -> bool:
    return _standin.pin_memory_available

"""Stand-in: GGUF pinned decode is off unless a test turns it on."""

from vllm import _standin


def pinned_decode_active() -> bool:
    return _standin.gguf_pinned_decode

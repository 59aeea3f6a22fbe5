"""Knobs of the stand-in engine, set by the tests."""

tp_rank = 0
tp_size = 1
pin_memory_available = True
offload_process = False
gguf_pinned_decode = False
cascade = False

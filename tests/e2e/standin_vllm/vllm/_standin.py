"""Knobs of the stand-in engine, set by the tests.

The PLE placement switches (cascade, GGUF pinned decode, offload) are not knobs: as in the
engine they are read from the resolved config (vllm.config.KernelConfig) and vllm.envs.
"""

tp_rank = 0
tp_size = 1
pin_memory_available = True
offload_process = False

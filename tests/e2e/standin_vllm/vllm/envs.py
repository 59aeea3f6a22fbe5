"""Stand-in vllm.envs: the variables read through the environment at access time.

Mirrors vllm/envs.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91, plus
``VLLM_PLE_DISK_RELEASE_PAGES`` (bool, default off), which Peuqui/1Cat-vLLM's ple_layer.py at
03b8cb99d71042cad9841f6722332fb8ec0b6946 reads and that commit's vllm/envs.py declares, and
``VLLM_SM70_QWEN38_DUAL_COMPILE`` (bool, default off: ``VLLM_SM70_QWEN38_DUAL_COMPILE: bool =
False`` in vllm/envs.py of rapatel0/1Cat-vLLM at a223f04653180aa0fb119c7bfead0dc7dfe6dbc2), which
vllm/compilation/sm70_decode_graph.py reads.
"""

import os

_BOOL = (
    "VLLM_PLE_CPU_OFFLOAD",
    "VLLM_PLE_DISK_OFFLOAD",
    "VLLM_SM70_QWEN38_HYBRID_PLE",
    "VLLM_PLE_DISK_RELEASE_PAGES",
    "VLLM_SM70_QWEN38_DUAL_COMPILE",
)
_INT = {"VLLM_PLE_DISK_OFFLOAD_NUM_THREADS": 0}
_FLOAT_OR_NONE = (
    "VLLM_QWEN4EXP_PLE_HOST_GIB",
    "VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB",
    "VLLM_QWEN4EXP_PLE_VRAM_RESERVE_GIB",
)


def __getattr__(name):
    if name in _BOOL:
        return os.environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")
    if name in _INT:
        return int(os.environ.get(name, _INT[name]))
    if name in _FLOAT_OR_NONE:
        value = os.environ.get(name)
        return None if value is None else float(value)
    raise AttributeError(f"module 'vllm.envs' has no attribute {name!r}")

"""Stand-in of the exact-size pinned host table of Qixiao02's fork.

Mirrors vllm/models/qwen4_exp/nvidia/exact_pin.py of Qixiao02/1Cat-vLLM (a fork of
1CatAI/1Cat-vLLM; its ple_layer.py at 0aac941e5e107a12953ac232a064b429ab9a0275 imports
``allocate_host_table``). The public index holds the module at
34c1e6c92b146587353c232a948381063a8ee0d6, not at 0aac941e. ``allocate_host_table(shape, dtype)``
returns the host half of the FP8 table: an empty table unpinned; otherwise, with
``SX_OPT_PLE_EXACT_PIN`` on (default), an exact-size mapping registered with the CUDA driver
(``cuMemHostRegister``), and whenever that path is off or fails, ``torch.empty(...,
pin_memory=True)``. The stand-in has no CUDA driver binding, so it always takes that fallback,
which is what the real module does when the driver path fails.
"""

import torch


def allocate_host_table(shape, dtype):
    return torch.empty(shape, dtype=dtype, device="cpu", pin_memory=shape[0] > 0)

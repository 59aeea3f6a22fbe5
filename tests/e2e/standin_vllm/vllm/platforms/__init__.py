"""Stand-in current_platform.

Mirrors vllm/platforms of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91: the
CUDA platform (platforms/cuda.py) has ``dispatch_key = "CUDA"``, the CPU platform
(platforms/cpu.py) ``"CPU"``; ``direct_register_custom_op`` registers each op for
``current_platform.dispatch_key``. Here the platform is CUDA when torch has CUDA, else CPU.
"""

import torch


class _Platform:
    simple_compile_backend = "eager"

    def __init__(self) -> None:
        self.dispatch_key = "CUDA" if torch.cuda.is_available() else "CPU"

    def is_cuda(self) -> bool:
        return self.dispatch_key == "CUDA"

    def is_cuda_alike(self) -> bool:
        return self.is_cuda()

    def is_cpu(self) -> bool:
        return self.dispatch_key == "CPU"

    def get_device_capability(self, device_id=0):
        return None  # never the pre-Ampere FP8 split path in these tests


current_platform = _Platform()

"""Stand-in current_platform: CUDA when torch has it."""

import torch


class _Platform:
    simple_compile_backend = "eager"
    dispatch_key = "CUDA"

    def is_cuda(self) -> bool:
        return torch.cuda.is_available()

    def is_cuda_alike(self) -> bool:
        return torch.cuda.is_available()

    def is_cpu(self) -> bool:
        return not torch.cuda.is_available()

    def get_device_capability(self, device_id=0):
        return None  # never the pre-Ampere FP8 split path in these tests


current_platform = _Platform()

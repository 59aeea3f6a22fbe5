"""Stand-in: the real Triton.

Mirrors vllm/triton_utils/__init__.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

import triton
import triton.language as tl

__all__ = ["tl", "triton"]

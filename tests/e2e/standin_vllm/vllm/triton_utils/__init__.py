"""Stand-in: the real Triton."""

import triton
import triton.language as tl

__all__ = ["tl", "triton"]

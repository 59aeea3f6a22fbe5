"""Stand-in.

Mirrors vllm/v1/attention/backends/registry.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

import enum


class MambaAttentionBackendEnum(enum.Enum):
    SHORT_CONV = "short_conv"

"""Stand-in.

Mirrors vllm/v1/attention/backends/utils.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

NULL_BLOCK_ID = 0

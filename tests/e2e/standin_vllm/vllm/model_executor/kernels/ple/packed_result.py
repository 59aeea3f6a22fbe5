"""Stand-in.

Mirrors vllm/model_executor/kernels/ple/packed_result.py of 1CatAI/1Cat-vLLM: no real source of it is available here (added after
ae13773a0deebf583022613c4508e5072cedef91); it only provides the names the real ple_layer.py files import.
"""


def packed_result_layout(prefix):
    return None

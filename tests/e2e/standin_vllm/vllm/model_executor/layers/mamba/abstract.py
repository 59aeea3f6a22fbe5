"""Stand-in.

Mirrors vllm/model_executor/layers/mamba/abstract.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""


class MambaBase:
    pass

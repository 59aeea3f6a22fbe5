"""Stand-in.

Mirrors vllm/model_executor/layers/mamba/mamba_utils.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""


class MambaStateDtypeCalculator:
    pass


class MambaStateShapeCalculator:
    pass


def is_conv_state_dim_first() -> bool:
    return False

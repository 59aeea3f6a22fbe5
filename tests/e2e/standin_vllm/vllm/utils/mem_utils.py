"""Stand-in format_gib (vllm/utils/mem_utils.py in 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91)."""


def format_gib(b: int) -> str:
    return f"{round(b / (1 << 30), 2)}"

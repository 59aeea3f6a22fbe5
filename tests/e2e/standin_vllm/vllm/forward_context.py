"""Stand-in vllm.forward_context.

Mirrors vllm/forward_context.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

from types import SimpleNamespace

from vllm.config import get_current_vllm_config


def get_forward_context():
    context = get_current_vllm_config().compilation_config.static_forward_context
    return SimpleNamespace(no_compile_layers=context)

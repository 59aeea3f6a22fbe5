"""Stand-in vllm.forward_context."""

from types import SimpleNamespace

from vllm.config import get_current_vllm_config


def get_forward_context():
    context = get_current_vllm_config().compilation_config.static_forward_context
    return SimpleNamespace(no_compile_layers=context)

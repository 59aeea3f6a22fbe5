"""Stand-in vllm.forward_context.

Mirrors vllm/forward_context.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91:
``get_forward_context()`` gives the layers registered in the config's static forward context
(here the forward context is the current config's; the stand-in sets no separate one).

``get_forward_kernel_config_or_none()``: 1CatAI/1Cat-vLLM's ple_layer.py at
22ab8e0743c277d1418aa62de274cfac27252d04 and 6d7071b64dc557be0c18982c4f480e8f147c31a1 import it
and call it with no argument; ``policy is None or policy.prefill_ple_short_conv`` (prefill conv)
and ``policy is None or policy.prefill_ple_compact_gate`` (compact gate) treat None as the
defaults. No public copy of its definition is in the index (forward_context.py of 1CatAI at
ee0bc6a875f891ff4785bfbdb1cd9ed35b21f647 and of abcd19886/1Cat-vLLM at
b2055708be93d907c17ca49ae95c83df720efde0 predate it). What it returns is read from its callers:
tests/models/qwen4_exp/test_ple_prefill_gate.py of 1CatAI at
4967ee9d185de4964963a157ce331da39b7f58de builds a forward context from a ``VllmConfig`` and
toggles ``config.kernel_config.prefill_ple_compact_gate`` under it, so it is the
``kernel_config`` of the config the forward context was made from, and None without one. Here:
the current config's ``kernel_config``, None outside ``set_current_vllm_config``.
"""

from types import SimpleNamespace

from vllm.config import get_current_vllm_config, get_current_vllm_config_or_none


def get_forward_context():
    context = get_current_vllm_config().compilation_config.static_forward_context
    return SimpleNamespace(no_compile_layers=context)


def get_forward_kernel_config_or_none():
    config = get_current_vllm_config_or_none()
    return None if config is None else config.kernel_config

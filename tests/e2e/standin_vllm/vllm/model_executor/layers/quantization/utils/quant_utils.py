"""Stand-in is_layer_skipped (vllm/model_executor/layers/quantization/utils/quant_utils.py in
1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91: same parameters; here only an exact prefix match, which is all the PLE tests need)."""

from types import MappingProxyType


def is_layer_skipped(prefix, ignored_layers, fused_mapping=MappingProxyType({}), *, skip_with_substr=False) -> bool:
    if skip_with_substr:
        return any(name in prefix for name in ignored_layers)
    return prefix in ignored_layers

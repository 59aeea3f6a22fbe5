"""Stand-in.

Mirrors vllm/v1/attention/backends/short_conv_attn.py (PleShortConvAttentionBackend/Metadata were added after ae13773a) of 1CatAI/1Cat-vLLM: no real source of it is available here (added after
ae13773a0deebf583022613c4508e5072cedef91); it only provides the names the real ple_layer.py files import.
"""


class PleShortConvAttentionBackend:
    pass


class PleShortConvAttentionMetadata:
    pass

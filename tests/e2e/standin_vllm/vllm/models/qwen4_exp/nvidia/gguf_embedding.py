"""Stand-in: GGUF PLE classes (never built in these tests).

Mirrors vllm/models/qwen4_exp/nvidia/gguf_embedding.py of 1CatAI/1Cat-vLLM: no real source of it is available here (added after
ae13773a0deebf583022613c4508e5072cedef91); it only provides the names the real ple_layer.py files import.
"""

from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase


class Qwen4ExpPLEGGUFEmbeddingMethod(QuantizeMethodBase):
    def __init__(self, quant_config=None):
        self.quant_config = quant_config

    def create_weights(self, layer, *args, **kwargs):
        raise NotImplementedError

    def apply(self, layer, *args, **kwargs):
        raise NotImplementedError


class Qwen4ExpPackedGGUFEmbedding:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the stand-in engine has no GGUF PLE")

"""Stand-in: GGUF PLE classes (never built in these tests)."""

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

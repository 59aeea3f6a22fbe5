"""Stand-in GGUFConfig: the constructor of vllm/model_executor/layers/quantization/gguf.py in
1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class GGUFConfig(QuantizationConfig):
    def __init__(self, unquantized_modules=None):
        super().__init__()
        self.unquantized_modules = unquantized_modules or []

    def get_name(self) -> str:
        return "gguf"

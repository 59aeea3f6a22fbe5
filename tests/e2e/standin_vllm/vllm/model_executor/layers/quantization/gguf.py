"""Stand-in GGUFConfig, GGUFLinearMethod and GGUFEmbeddingMethod: the constructors of vllm/model_executor/layers/quantization/gguf.py in
1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class GGUFConfig(QuantizationConfig):
    def __init__(self, unquantized_modules=None):
        super().__init__()
        self.unquantized_modules = unquantized_modules or []

    def get_name(self) -> str:
        return "gguf"


class GGUFLinearMethod:
    """The linear method's constructor (its weights and kernels are not reproduced: the tests load
    no GGUF checkpoint)."""

    def __init__(self, quant_config: GGUFConfig):
        self.quant_config = quant_config


class GGUFEmbeddingMethod(GGUFLinearMethod):
    """Imported by 1CatAI main b8f9c1aa's ple_layer.py for a GGUF quant config, which no test
    passes (``embedding`` runs the engine's GGUF dequant kernels in the real module)."""

    def embedding(self, layer, x):
        raise NotImplementedError("the stand-in does not run GGUF embeddings")

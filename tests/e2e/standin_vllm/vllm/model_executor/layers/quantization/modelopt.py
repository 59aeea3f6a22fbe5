"""Stand-in ModelOptMixedPrecisionConfig: the constructor of
vllm/model_executor/layers/quantization/modelopt.py in 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class ModelOptMixedPrecisionConfig(QuantizationConfig):
    def __init__(self, kv_cache_quant_method, exclude_modules, quantized_layers, fp8_config,
                 nvfp4_config, w4a16_nvfp4_config):
        super().__init__()
        self.exclude_modules = exclude_modules
        self.quantized_layers = quantized_layers

    def get_name(self) -> str:
        return "modelopt_mixed"

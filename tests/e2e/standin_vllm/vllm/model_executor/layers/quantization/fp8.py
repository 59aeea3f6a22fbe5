"""Stand-in Fp8Config: the constructor of vllm/model_executor/layers/quantization/fp8.py in
1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class Fp8Config(QuantizationConfig):
    def __init__(self, is_checkpoint_fp8_serialized=False, activation_scheme="dynamic",
                 ignored_layers=None, weight_block_size=None):
        super().__init__()
        self.is_checkpoint_fp8_serialized = is_checkpoint_fp8_serialized
        self.activation_scheme = activation_scheme
        self.ignored_layers = ignored_layers or []
        self.weight_block_size = weight_block_size

    def get_name(self) -> str:
        return "fp8"

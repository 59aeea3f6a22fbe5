"""Stand-in."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class Fp8Config(QuantizationConfig):
    def __init__(self, is_checkpoint_fp8_serialized=True, ignored_layers=()):
        self.is_checkpoint_fp8_serialized = is_checkpoint_fp8_serialized
        self.ignored_layers = list(ignored_layers)
        self.packed_modules_mapping = {}

    def get_name(self) -> str:
        return "fp8"

"""Stand-in."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class GGUFConfig(QuantizationConfig):
    def get_name(self) -> str:
        return "gguf"

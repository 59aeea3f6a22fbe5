"""Stand-in."""

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class ModelOptMixedPrecisionConfig(QuantizationConfig):
    def get_name(self) -> str:
        return "modelopt_mixed"

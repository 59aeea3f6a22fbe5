"""Stand-in quantization base classes (vllm/model_executor/layers/quantization/base_config.py in
1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91: QuantizeMethodBase is an ABC with abstract create_weights/apply;
QuantizationConfig.__init__ takes no argument)."""

from abc import ABC, abstractmethod


class QuantizeMethodBase(ABC):
    @abstractmethod
    def create_weights(self, layer, *weight_args, **extra_weight_attrs):
        raise NotImplementedError

    @abstractmethod
    def apply(self, layer, *args, **kwargs):
        raise NotImplementedError

    def embedding(self, layer, *args, **kwargs):
        raise NotImplementedError

    def process_weights_after_loading(self, layer) -> None:
        return


class QuantizationConfig:
    def __init__(self):
        self.packed_modules_mapping: dict = {}

    def get_name(self) -> str:
        return type(self).__name__.lower()

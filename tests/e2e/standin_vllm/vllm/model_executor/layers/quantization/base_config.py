"""Stand-in quantization base classes."""

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
    packed_modules_mapping: dict = {}

    def get_name(self) -> str:
        return type(self).__name__.lower()

"""Stand-in vLLM parameters: plain parameters with a weight_loader attribute (constructors as
vllm/model_executor/parameter.py in 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91: PerTensorScaleParameter(**kwargs),
ModelWeightParameter with its bases' constructor)."""

import torch
from torch import nn


class BasevLLMParameter(nn.Parameter):
    def __new__(cls, data, **kwargs):
        return super().__new__(cls, data=data, requires_grad=False)

    def __init__(self, data, weight_loader=None, **kwargs):
        self.weight_loader = weight_loader
        for key, value in kwargs.items():
            setattr(self, key, value)


class ModelWeightParameter(BasevLLMParameter):
    pass


class PerTensorScaleParameter(BasevLLMParameter):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)

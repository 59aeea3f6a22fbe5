"""Stand-in vLLM parameters: plain parameters with a weight_loader attribute."""

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
    pass

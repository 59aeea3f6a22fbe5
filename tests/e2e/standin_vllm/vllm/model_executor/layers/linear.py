"""Stand-in."""

from torch import nn


class ReplicatedLinear(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

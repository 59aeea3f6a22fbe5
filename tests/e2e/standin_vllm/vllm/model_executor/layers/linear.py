"""Stand-in ReplicatedLinear: the constructor of vllm/model_executor/layers/linear.py in
1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91; no weights (the PLE tests do not run the projections)."""

from torch import nn


class ReplicatedLinear(nn.Module):
    def __init__(self, input_size, output_size, bias=True, skip_bias_add=False, params_dtype=None,
                 quant_config=None, prefix="", *, return_bias=True, disable_tp=False):
        super().__init__()
        self.input_size, self.output_size, self.prefix = input_size, output_size, prefix

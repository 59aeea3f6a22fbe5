"""Stand-in FP8 parameter helpers.

Mirrors vllm/model_executor/layers/quantization/utils/fp8_utils.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

import torch

from vllm.model_executor.parameter import ModelWeightParameter


def create_fp8_weight_parameter(output_size_per_partition, input_size_per_partition, weight_loader):
    return ModelWeightParameter(
        data=torch.empty(
            output_size_per_partition, input_size_per_partition, dtype=torch.float8_e4m3fn
        ),
        input_dim=1,
        output_dim=0,
        weight_loader=weight_loader,
    )


def create_fp8_scale_parameter(
    parameter_type, output_partition_sizes, input_size_per_partition, block_size, weight_loader,
    scale_dtype=torch.float32,
):
    return parameter_type(
        data=torch.empty(len(output_partition_sizes), dtype=scale_dtype or torch.float32),
        weight_loader=weight_loader,
    )


def is_fp8(x) -> bool:
    dtype = x.dtype if isinstance(x, torch.Tensor) else x
    return dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz)

"""Stand-in VocabParallelEmbedding: rows split over tensor-parallel ranks, masked lookups.

Mirrors vllm/model_executor/layers/vocab_parallel_embedding.py (plus the keyword-only quant_method every real ple_layer.py passes, added after that commit) of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.

Written for the tests: rank r of n holds the padded rows [r * R/n, (r + 1) * R/n); ids outside
its range read row 0 and come out as zeros; the all-reduce is the identity (one rank).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vllm.distributed import (
    divide,
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_reduce,
)
from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase


class UnquantizedEmbeddingMethod(QuantizeMethodBase):
    def create_weights(self, layer, input_size_per_partition, output_partition_sizes,
                       input_size, output_size, params_dtype, **extra_weight_attrs):
        weight = nn.Parameter(
            torch.empty(sum(output_partition_sizes), input_size_per_partition, dtype=params_dtype),
            requires_grad=False,
        )
        weight.weight_loader = extra_weight_attrs.get("weight_loader")
        layer.register_parameter("weight", weight)

    def apply(self, layer, x, bias=None):
        raise NotImplementedError

    def embedding(self, layer, input_):
        return F.embedding(input_, layer.weight)


@dataclass
class ShardIndices:
    org_vocab_start_index: int
    org_vocab_end_index: int
    num_org_vocab_padding: int
    added_vocab_start_index: int
    added_vocab_end_index: int


def _pad(size: int, to: int) -> int:
    return (size + to - 1) // to * to


def get_masked_input_and_mask(input_, org_vocab_start_index, org_vocab_end_index,
                              num_org_vocab_padding, added_vocab_start_index,
                              added_vocab_end_index):
    inside = (input_ >= org_vocab_start_index) & (input_ < org_vocab_end_index)
    masked = torch.where(inside, input_ - org_vocab_start_index, torch.zeros_like(input_))
    return masked, ~inside


class VocabParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, params_dtype=None, org_num_embeddings=None,
                 padding_size=64, quant_config=None, prefix="", *, quant_method=None):
        super().__init__()
        self.prefix = prefix
        self.tp_size = get_tensor_model_parallel_world_size()
        rank = get_tensor_model_parallel_rank()
        self.num_embeddings = num_embeddings
        self.org_vocab_size = org_num_embeddings or num_embeddings
        self.num_embeddings_padded = _pad(_pad(self.org_vocab_size, padding_size), padding_size)
        self.num_embeddings_per_partition = divide(self.num_embeddings_padded, self.tp_size)
        start = rank * self.num_embeddings_per_partition
        end = start + self.num_embeddings_per_partition
        org_start, org_end = min(start, self.org_vocab_size), min(end, self.org_vocab_size)
        self.shard_indices = ShardIndices(
            org_start, org_end, (end - start) - (org_end - org_start),
            self.org_vocab_size, self.org_vocab_size,
        )
        self.embedding_dim = embedding_dim
        self.quant_method = quant_method or UnquantizedEmbeddingMethod()
        params_dtype = params_dtype or torch.get_default_dtype()
        self.params_dtype = params_dtype
        self.quant_method.create_weights(
            self, embedding_dim, [self.num_embeddings_per_partition], embedding_dim,
            self.num_embeddings_padded, params_dtype=params_dtype,
            weight_loader=self.weight_loader,
        )

    def weight_loader(self, param, loaded_weight):
        if loaded_weight.dim() == 0 or param.dim() == 1:
            param.data.copy_(loaded_weight.reshape(param.shape))
            return
        start = self.shard_indices.org_vocab_start_index
        rows = self.shard_indices.org_vocab_end_index - start
        param.data[:rows].copy_(loaded_weight[start : start + rows])

    def forward(self, input_):
        input_mask = None
        masked_input = input_
        if self.tp_size > 1:
            s = self.shard_indices
            masked_input, input_mask = get_masked_input_and_mask(
                input_, s.org_vocab_start_index, s.org_vocab_end_index,
                s.num_org_vocab_padding, s.added_vocab_start_index, s.added_vocab_end_index,
            )
        output = self.quant_method.embedding(self, masked_input.long())
        if input_mask is not None:
            output.masked_fill_(input_mask.unsqueeze(-1), 0)
        return tensor_model_parallel_all_reduce(output)

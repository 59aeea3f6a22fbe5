"""Stand-in of the Qwen4Exp model classes that hand checkpoint names to the PLE layer.

Mirrors the weight-name path of vllm/models/qwen4_exp/nvidia/model.py in 1CatAI/1Cat-vLLM at
0b7f563b15e0a0e668c3937c49686d0bcb93b384:
- ``Qwen4ExpForConditionalGeneration.load_weights``: ``AutoWeightsLoader(self, skip_prefixes=
  ["visual."] if language_model_only else None, skip_substrs=["mtp."], ...)`` with its
  ``hf_to_vllm_mapper``, inherited through Qwen3_5ForConditionalGeneration from
  Qwen3VLForConditionalGeneration (vllm/model_executor/models/qwen3_vl.py at ae13773a):
  ``model.visual.`` -> ``visual.``, ``lm_head.`` -> ``language_model.lm_head.``,
  ``model.language_model.`` -> ``language_model.model.``; its ``language_model`` is a
  ``Qwen4ExpForCausalLM``;
- ``Qwen4ExpForCausalLM.load_weights``: ``AutoWeightsLoader(self, skip_substrs=["mtp."], ...)``
  with ``hf_to_vllm_mapper`` ``model.language_model.`` -> ``model.``; children ``model``
  (``Qwen4ExpModel``) and ``lm_head``;
- ``Qwen4ExpModel.load_weights``: ``AutoWeightsLoader(self, skip_substrs=["hashstats_",
  "token_lookup", "hyper_connection_mixer.block_inject_weight"], ...)``; its decoder layers hold
  the PLE layer as ``ple`` (``Qwen4ExpPLELayer(..., prefix=f"{prefix}.ple")`` on the 1-based
  ``config.ple_layer_ids``), whose ``ple_embedding`` is the file's ``Qwen4ExpNGramEmbedding``.

Not reproduced: attention, MoE, hyper-connections, the QSA scale remap and shared-expert fusion
(no PLE name passes through them), and the engine's ``_QWEN4_EXP_IGNORED_MISSING_SUFFIXES``
(empty here). The PLE layer itself is ``PleLayer`` below: it builds the engine file's own
``Qwen4ExpNGramEmbedding`` with the arguments that file's ``Qwen4ExpPLELayer`` passes; the
tests hand the engine module in (the real model imports it as ``.ple_layer``).
"""

import inspect

import torch
from torch import nn

from vllm.model_executor.models.utils import AutoWeightsLoader, WeightsMapper, maybe_prefix


class PleLayer(nn.Module):
    """Qwen4ExpPLELayer's share of the weight path: ``ple_embedding`` and no load_weights."""

    def __init__(self, ple_module, config, *, ple_dense_layer_id, max_num_batched_tokens,
                 max_num_seqs, prefix, quant_config=None, params_dtype=None):
        super().__init__()
        cls = ple_module.Qwen4ExpNGramEmbedding
        kwargs = dict(quant_config=quant_config, params_dtype=params_dtype)
        # Versions whose embedding resolves its gather op by layer name take layer_name=prefix
        # (1Cat-vLLM a223f046 ple_layer.py, Qwen4ExpPLELayer: `layer_name=prefix`); the earlier
        # ones (12f2ad43, 45d0a3bb) have no such parameter.
        if "layer_name" in inspect.signature(cls.__init__).parameters:
            kwargs["layer_name"] = prefix
        self.ple_embedding = cls(
            config,
            int(config.ple_embed_dim),
            ple_dense_layer_id,
            max_num_batched_tokens,
            max_num_seqs,
            f"{prefix}.ple_embedding",
            **kwargs,
        )


class Qwen4ExpDecoderLayer(nn.Module):
    def __init__(self, ple_module, config, layer_idx, *, prefix, quant_config=None, params_dtype=None,
                 max_num_batched_tokens=16, max_num_seqs=2):
        super().__init__()
        self.input_layernorm = nn.Module()
        self.input_layernorm.weight = nn.Parameter(torch.zeros(4), requires_grad=False)
        self.ple = None
        ple_ids = sorted(set(config.ple_layer_ids))
        if layer_idx + 1 in ple_ids:
            self.ple = PleLayer(
                ple_module, config, ple_dense_layer_id=ple_ids.index(layer_idx + 1),
                max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                prefix=f"{prefix}.ple", quant_config=quant_config, params_dtype=params_dtype,
            )


class Qwen4ExpModel(nn.Module):
    hf_to_vllm_mapper = WeightsMapper(orig_to_new_prefix={"model.language_model.": "model."})

    def __init__(self, ple_module, config, *, prefix="model", num_layers=2, **kwargs):
        super().__init__()
        self.layers = nn.ModuleList(
            Qwen4ExpDecoderLayer(ple_module, config, i, prefix=f"{prefix}.layers.{i}", **kwargs)
            for i in range(num_layers)
        )

    def load_weights(self, weights):
        skip_substrs = ["hashstats_", "token_lookup", "hyper_connection_mixer.block_inject_weight"]
        loader = AutoWeightsLoader(self, skip_substrs=skip_substrs)
        return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)


class Qwen4ExpForCausalLM(nn.Module):
    hf_to_vllm_mapper = WeightsMapper(orig_to_new_prefix={"model.language_model.": "model."})

    def __init__(self, ple_module, config, *, prefix="", **kwargs):
        super().__init__()
        self.model = Qwen4ExpModel(ple_module, config, prefix=maybe_prefix(prefix, "model"), **kwargs)
        self.lm_head = nn.Module()
        self.lm_head.weight = nn.Parameter(torch.zeros(4), requires_grad=False)

    def load_weights(self, weights):
        loader = AutoWeightsLoader(self, skip_substrs=["mtp."])
        return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)


class Qwen4ExpForConditionalGeneration(nn.Module):
    hf_to_vllm_mapper = WeightsMapper(
        orig_to_new_prefix={
            "model.visual.": "visual.",
            "lm_head.": "language_model.lm_head.",
            "model.language_model.": "language_model.model.",
        }
    )

    def __init__(self, ple_module, config, *, prefix="model", language_model_only=True, **kwargs):
        super().__init__()
        self.language_model_only = language_model_only
        self.language_model = Qwen4ExpForCausalLM(
            ple_module, config, prefix=maybe_prefix(prefix, "language_model"), **kwargs
        )

    def load_weights(self, weights):
        loader = AutoWeightsLoader(
            self,
            skip_prefixes=["visual."] if self.language_model_only else None,
            skip_substrs=["mtp."],
        )
        return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)

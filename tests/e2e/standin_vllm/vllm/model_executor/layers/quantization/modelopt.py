"""Stand-in ModelOpt quantization configs: the constructors, and what ple_layer.py reads.

ModelOptMixedPrecisionConfig: the constructor of vllm/model_executor/layers/quantization/modelopt.py
in 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.

ModelOptNvFp4Config, imported by vllm-project/vllm's ple_layer.py at
020a97c768b88cb61049abc3961ad9d7793ca10e (which checks ``isinstance``,
``is_checkpoint_nvfp4_serialized`` and ``is_layer_excluded(prefix)``): the public index holds that
repository's modelopt.py at 00155cdecca722d98e34234c3d172725b7720b7d, not at 020a97c7. There the
constructor is ``(quant_method="NVFP4", is_checkpoint_nvfp4_serialized=False,
kv_cache_quant_algo=None, exclude_modules=None, group_size=16, nvfp4_embed=False)`` (1CatAI/1Cat-vLLM
at ae13773a has the same without ``nvfp4_embed``); a quant_method other than NVFP4 or W4A16_NVFP4
raises ValueError; ``group_size`` is kept only for a serialized checkpoint. ``is_layer_excluded``
(of ModelOptQuantConfigBase) is false for an empty exclude list, else true for a layer skipped by
``is_layer_skipped``, for an exclude entry that is a substring of the prefix (or of the prefix
without ``language_model.``), or for a wildcard entry matching it (fnmatch).
"""

from fnmatch import fnmatch

from vllm.model_executor.layers.quantization.base_config import QuantizationConfig
from vllm.model_executor.layers.quantization.utils.quant_utils import is_layer_skipped


class ModelOptMixedPrecisionConfig(QuantizationConfig):
    def __init__(self, kv_cache_quant_method, exclude_modules, quantized_layers, fp8_config,
                 nvfp4_config, w4a16_nvfp4_config):
        super().__init__()
        self.exclude_modules = exclude_modules
        self.quantized_layers = quantized_layers

    def get_name(self) -> str:
        return "modelopt_mixed"


class ModelOptQuantConfigBase(QuantizationConfig):
    def __init__(self, exclude_modules):
        super().__init__()
        self.exclude_modules = exclude_modules

    def is_layer_excluded(self, prefix: str) -> bool:
        if not self.exclude_modules:
            return False
        if is_layer_skipped(prefix, self.exclude_modules, self.packed_modules_mapping):
            return True
        bare = prefix.removeprefix("language_model.") if prefix.startswith("language_model.") else None
        for entry in self.exclude_modules:
            if entry != prefix and (entry in prefix or (bare is not None and entry in bare)):
                return True
        return any(fnmatch(prefix, entry) for entry in self.exclude_modules)


class ModelOptNvFp4Config(ModelOptQuantConfigBase):
    def __init__(self, quant_method="NVFP4", is_checkpoint_nvfp4_serialized=False,
                 kv_cache_quant_algo=None, exclude_modules=None, group_size=16, nvfp4_embed=False):
        super().__init__([] if exclude_modules is None else exclude_modules)
        if quant_method not in ("NVFP4", "W4A16_NVFP4"):
            raise ValueError(f"Unsupported ModelOpt NVFP4 quant_algo: {quant_method}. "
                             "Supported: NVFP4 / W4A16_NVFP4.")
        self.quant_method = quant_method
        self.is_checkpoint_nvfp4_serialized = is_checkpoint_nvfp4_serialized
        self.nvfp4_embed = nvfp4_embed
        if is_checkpoint_nvfp4_serialized:
            self.group_size = group_size
            self.kv_cache_quant_algo = kv_cache_quant_algo

    def get_name(self) -> str:
        return "modelopt_fp4"

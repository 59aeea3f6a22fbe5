"""End-to-end harness: patched ple_layer.py files imported against the stand-in `vllm`.

`tests/e2e/standin_vllm/vllm` provides every name the real 1Cat-vLLM ple_layer.py files import
(tests only). A patched file is imported as a module of the stand-in package
`vllm.models.qwen4_exp.nvidia` (its relative imports resolve there), under the Triton
interpreter when there is no CUDA. Checkpoint tensors are made here from random bytes and fed
through the file's real `Qwen4ExpNGramEmbedding.load_weights`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

STANDIN = Path(__file__).resolve().parent / "standin_vllm"
PREFIX = "model.layers.0.ple.ple_embedding"
HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # The interpreter is chosen when a kernel is decorated and consulted again when it runs.
    os.environ["TRITON_INTERPRET"] = "1"
_counter = itertools.count()


def standin_vllm():
    """Put the stand-in `vllm` first on sys.path and return its knob module."""
    if str(STANDIN) not in sys.path:
        sys.path.insert(0, str(STANDIN))
    import vllm

    if not Path(vllm.__file__).resolve().is_relative_to(STANDIN):
        pytest.skip(f"a real vllm is importable ({vllm.__file__}); the e2e tests need the stand-in")
    from vllm import _standin

    return _standin


@contextlib.contextmanager
def knobs(**values):
    """Set stand-in knobs (tp_rank, tp_size, pin_memory_available, ...) for a block."""
    standin = standin_vllm()
    saved = {k: getattr(standin, k) for k in values}
    for k, v in values.items():
        setattr(standin, k, v)
    try:
        yield standin
    finally:
        for k, v in saved.items():
            setattr(standin, k, v)


def import_engine_file(text: str, directory: Path, tag: str):
    """Import `text` (a ple_layer.py) as a module of the stand-in package; kernels are
    interpreted when there is no CUDA. The custom ops it registers become the active ones."""
    standin_vllm()
    import vllm.models.qwen4_exp.nvidia  # noqa: F401  (the parent package of the module)
    from vllm.utils import torch_utils

    name = f"vllm.models.qwen4_exp.nvidia.ple_layer_{tag}_{next(_counter)}"
    path = directory / f"{name.rsplit('.', 1)[-1]}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    torch_utils.new_process()  # each engine file is imported as by a fresh engine process
    spec.loader.exec_module(module)
    torch_utils.activate(module)
    return module


@dataclass(frozen=True)
class Geometry:
    """A small Qwen4Exp PLE config: ngram_heads = (ngram_size - 1) * heads_per_ngram."""

    head_dim: int = 32
    ngram_size: int = 3
    heads_per_ngram: int = 2
    ngram_vocab_size_base: int = 500
    divisor: int = 64
    split_ngram_parts: int = 3

    @property
    def ngram_heads(self) -> int:
        return (self.ngram_size - 1) * self.heads_per_ngram


def make_config(geometry: Geometry = Geometry(), **overrides):
    standin_vllm()
    from vllm.transformers_utils.configs.qwen4_exp import Qwen4ExpTextConfig

    values = dict(
        ngram_size=geometry.ngram_size,
        heads_per_ngram=geometry.heads_per_ngram,
        eos_token_id=0,
        vocab_size=1000,
        split_ngram_parts=geometry.split_ngram_parts,
        seed=1234,
        ngram_vocab_size_base=geometry.ngram_vocab_size_base,
        make_ngram_vocab_size_divisible_by=geometry.divisor,
        ple_embedding_dtype="nvfp4_rowpacked",
    )
    values.update(overrides)
    return Qwen4ExpTextConfig(**values)


@contextlib.contextmanager
def engine_config(vllm_config=None, **kernel):
    """A current vLLM config, as the engine sets one around model construction and loading
    (``set_current_vllm_config``); ``kernel`` sets KernelConfig fields (e.g. the resolved
    ``ple_disk_cascade_active`` or ``ple_pinned_decode_active``)."""
    standin_vllm()
    from vllm.config import VllmConfig, set_current_vllm_config

    vllm_config = vllm_config if vllm_config is not None else VllmConfig()
    for key, value in kernel.items():
        setattr(vllm_config.kernel_config, key, value)
    with set_current_vllm_config(vllm_config):
        yield vllm_config


def current_or_engine_config():
    """The config already current (a test's own, say with a parallel config), else a default one."""
    standin_vllm()
    from vllm.config import get_current_vllm_config_or_none

    return contextlib.nullcontext() if get_current_vllm_config_or_none() is not None else engine_config()


def _embedding_kwargs(module, prefix: str) -> dict:
    # What the file's own Qwen4ExpPLELayer passes: layer_name=prefix where the embedding takes it
    # (1Cat-vLLM a223f046 and later), nothing in the earlier versions (12f2ad43, 45d0a3bb).
    import inspect

    params = inspect.signature(module.Qwen4ExpNGramEmbedding.__init__).parameters
    return {"layer_name": prefix.rsplit(".", 1)[0]} if "layer_name" in params else {}


def build(module, config, geometry: Geometry = Geometry(), *, prefix: str = PREFIX, quant_config=None,
          params_dtype=torch.float16):
    """Construct the module's Qwen4ExpNGramEmbedding as Qwen4ExpPLELayer does, inside the current
    config (a default one when none is set, as the engine always has one during construction)."""
    with current_or_engine_config():
        return module.Qwen4ExpNGramEmbedding(
            config,
            geometry.ngram_heads * geometry.head_dim,
            0,
            16,
            2,
            prefix=prefix,
            quant_config=quant_config,
            params_dtype=params_dtype,
            **_embedding_kwargs(module, prefix),
        )


# The model-level path: the checkpoint names of the HF export, handed down
# Qwen4ExpForConditionalGeneration -> Qwen4ExpForCausalLM -> Qwen4ExpModel -> AutoWeightsLoader
# -> Qwen4ExpNGramEmbedding.load_weights (tests/e2e/standin_vllm/vllm/models/qwen4_exp/nvidia/model.py).
HF_LAYER = "model.language_model.layers.{layer}.ple.ple_embedding."
PLE_LAYER_IDS = (2,)  # 1-based, as in the config: the PLE sits on layers.1


def build_model(module, config, geometry: Geometry = Geometry(), *, quant_config=None, params_dtype=torch.float16):
    """The stand-in Qwen4ExpForConditionalGeneration over the module's PLE embedding."""
    from vllm.models.qwen4_exp.nvidia.model import Qwen4ExpForConditionalGeneration

    config.ple_layer_ids = list(PLE_LAYER_IDS)
    config.ple_embed_dim = geometry.ngram_heads * geometry.head_dim
    with current_or_engine_config():
        return Qwen4ExpForConditionalGeneration(
            module, config, quant_config=quant_config, params_dtype=params_dtype
        )


def model_embedding(model):
    layer = PLE_LAYER_IDS[0] - 1
    return model.language_model.model.layers[layer].ple.ple_embedding


def hf_checkpoint(tensors: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    """The embedding's tensors under their names in the HF checkpoint, with the neighbours a real
    checkpoint has: an MTP tensor (skipped by the engine), lm_head and another layer's weight."""
    prefix = HF_LAYER.format(layer=PLE_LAYER_IDS[0] - 1)
    named = [(prefix + name, t) for name, t in tensors]
    return [
        ("model.language_model.layers.0.input_layernorm.weight", torch.ones(4)),
        *named,
        ("mtp.layers.0.ple.ple_embedding.ngram_embedding.shard_0.weight", torch.zeros(1)),
        ("lm_head.weight", torch.full((4,), 2.0)),
    ]


def finish_loading(model: torch.nn.Module) -> None:
    """What the engine does once every weight is loaded: each quant method's post-processing."""
    for sub in model.modules():
        method = getattr(sub, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(sub)


def random_table(rows: int, dim: int, seed: int) -> torch.Tensor:
    """Row-packed uint8 rows with every byte value possible (NaN scales included)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (rows, dim // 2 + dim // 16), generator=gen, dtype=torch.uint8)


def checkpoint(table: torch.Tensor, parts: int, dim: int, *, layout: str, global_scale: float,
               scale_per_shard: bool, scales_as_e4m3: bool = True) -> list[tuple[str, torch.Tensor]]:
    """Checkpoint tensors of the table, split like the engine's shards, names relative to the
    n-gram embedding module. layout: "rowpacked" or "split" (codes + E4M3 scales, scales first
    for odd shards to show the order does not matter)."""
    rows = table.shape[0]
    shard_size = (rows + parts - 1) // parts
    out: list[tuple[str, torch.Tensor]] = []
    scale = torch.tensor([global_scale], dtype=torch.float32)
    if not scale_per_shard:
        out.append(("ngram_embedding.weight_scale_2", scale.clone()))
    for i in range(parts):
        part = table[i * shard_size : (i + 1) * shard_size]
        name = f"ngram_embedding.shard_{i}"
        if layout == "rowpacked":
            tensors = [(f"{name}.weight", part.clone())]
        else:
            scales = part[:, dim // 2 :].clone()
            if scales_as_e4m3:
                scales = scales.view(torch.float8_e4m3fn)
            tensors = [(f"{name}.weight", part[:, : dim // 2].clone()), (f"{name}.weight_scale", scales)]
            if i % 2:
                tensors.reverse()
        out.extend(tensors)
        if scale_per_shard:
            out.append((f"{name}.weight_scale_2", scale.clone()))
    return out


def buffers_of(model) -> list[tuple[str, torch.Tensor]]:
    """The model's persistent hash buffers as checkpoint tensors (the stock loader's share),
    each value changed by +1 so a test can see that the stock loader copied them."""
    names = ("layer_multipliers", "ngram_heads_offsets", "ngram_heads_vocab_sizes")
    return [(n, getattr(model, n).clone() + 1) for n in names if hasattr(model, n)]

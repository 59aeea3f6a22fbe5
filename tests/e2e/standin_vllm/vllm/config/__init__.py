"""Stand-in vllm.config: the current config and the fields the PLE layer and the loader read.

Mirrors vllm/config/vllm.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91
(2026-08-22): ``get_current_vllm_config()`` raises AssertionError outside a
``set_current_vllm_config(...)`` context; ``get_current_vllm_config_or_none()`` returns None
there. The KernelConfig fields are those the PLE placement switches read:
``ple_disk_cascade`` / ``ple_disk_cascade_active`` (vllm/platforms/runtime_defaults.py at
51c0f97201a70a644a80ac21d292a15eff0dc4e6, ``_qwen4exp_ple_cascade_requested``) and
``ple_pinned_decode_active`` (vllm/model_executor/kernels/ple/gguf_pinned.py,
``pinned_decode_active``). ``prefill_ple_short_conv`` and ``prefill_ple_compact_gate`` (both on)
are the switches 1CatAI/1Cat-vLLM's ple_layer.py at 22ab8e0743c277d1418aa62de274cfac27252d04
reads from ``get_forward_kernel_config_or_none()`` before its SM70 prefill conv and compact gate;
tests/models/qwen4_exp/test_ple_prefill_gate.py at 4967ee9d185de4964963a157ce331da39b7f58de sets
the latter on ``config.kernel_config``, and the engine's design notes in the public index call
the compact gate "enabled by default" and ``prefill_ple_short_conv=false`` the way back to the
existing implementation.

The execution-policy owners of areslp/1Cat-vLLM (a fork of 1CatAI/1Cat-vLLM; its ple_layer.py at
1af83d8143de5286c13a60ecbdd3024f9f07fa42 reads ``ple_policy()`` and ``layer_policy()``, see
execution_policy.py): ``KernelConfig.layer_execution`` (a ``LayerExecutionPolicy``, as in its
vllm/config/kernel.py at 1af83d81) and ``offload_config.ple`` (a ``PlePlacementPolicy``). Each is
resolved from the environment when the config is built, as the engine resolves a policy once
and hands the resolved object to every later reader; the releases without policies never read
these fields.
"""

import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace

from vllm.config.execution_policy import LayerExecutionPolicy, PlePlacementPolicy, resolved


@dataclass
class CacheConfig:
    gpu_memory_utilization: float = 0.9


@dataclass
class ModelConfig:
    max_model_len: int = 4096
    dtype: object = None


@dataclass
class CompilationConfig:
    static_forward_context: dict = field(default_factory=dict)


@dataclass
class LoadConfig:
    load_format: str = "auto"


@dataclass
class KernelConfig:
    ple_disk_cascade: bool = True  # requested (on by default); resolved into the next field
    ple_disk_cascade_active: bool = False
    ple_disk_cascade_reason: str | None = None
    ple_pinned_decode_active: bool = False
    ple_disk_release_pages: bool = False
    ple_disk_row_gather: bool = False
    ple_disk_row_readers: dict = field(default_factory=dict)
    prefill_ple_short_conv: bool = True
    prefill_ple_compact_gate: bool = True
    layer_execution: LayerExecutionPolicy = field(default_factory=lambda: resolved(LayerExecutionPolicy))


@dataclass
class OffloadConfig:
    ple: PlePlacementPolicy = field(default_factory=lambda: resolved(PlePlacementPolicy))


@dataclass
class VllmConfig:
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    model_config: ModelConfig = field(default_factory=ModelConfig)
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)
    load_config: LoadConfig = field(default_factory=LoadConfig)
    parallel_config: object = field(
        default_factory=lambda: SimpleNamespace(
            tensor_parallel_size=1, local_world_size=1, data_parallel_size_local=1
        )
    )
    kernel_config: KernelConfig = field(default_factory=KernelConfig)
    offload_config: OffloadConfig = field(default_factory=OffloadConfig)


_current_vllm_config: VllmConfig | None = None


def get_current_vllm_config() -> VllmConfig:
    if _current_vllm_config is None:
        raise AssertionError(
            "Current vLLM config is not set. This typically means "
            "get_current_vllm_config() was called outside of a "
            "set_current_vllm_config() context, or a CustomOp was instantiated "
            "at module import time or model forward time when config is not set."
        )
    return _current_vllm_config


def get_current_vllm_config_or_none() -> VllmConfig | None:
    return _current_vllm_config


@contextlib.contextmanager
def set_current_vllm_config(vllm_config: VllmConfig, check_compile=False, prefix: str | None = None):
    global _current_vllm_config
    previous, _current_vllm_config = _current_vllm_config, vllm_config
    try:
        yield vllm_config
    finally:
        _current_vllm_config = previous

"""Stand-in vllm.config: a current config with the fields the PLE layer reads."""

import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace


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
    kernel_config: object = field(
        default_factory=lambda: SimpleNamespace(
            ple_disk_release_pages=False, ple_disk_row_gather=False, ple_disk_row_readers={}
        )
    )


_current = VllmConfig()


def get_current_vllm_config() -> VllmConfig:
    return _current


def get_current_vllm_config_or_none() -> VllmConfig:
    return _current


@contextlib.contextmanager
def set_current_vllm_config(config: VllmConfig):
    global _current
    previous, _current = _current, config
    try:
        yield config
    finally:
        _current = previous

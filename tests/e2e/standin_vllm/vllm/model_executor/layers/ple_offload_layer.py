"""Stand-in of the PLE offload base class, with the engine's constructor-skipping rule.

Mirrors vllm/model_executor/layers/ple_offload_layer.py of 1CatAI/1Cat-vLLM at
6bca559d3561cc10fcc08b2d2022ee568cfed95f: ``ple_offload_enabled(config=None)`` is true when
``VLLM_PLE_CPU_OFFLOAD`` is set or when the resolved config's ``kernel_config``
has ``ple_disk_cascade_active`` (the current config when none is given, None outside a config
context); ``PleOffloadLayer`` (an ``nn.Module`` and ABC with the abstract ``forward_impl``)
replaces a subclass constructor by a bare ``nn.Module.__init__`` in a GPU worker when offload is
on, hybrid PLE is off, the layer keeps no local tables and this is not the offload process;
``get_target_device`` is CPU for offload and the current CUDA device otherwise. The CUDA IPC
semaphore and the wait op are not reproduced (no test reaches them).
"""

import functools
from abc import ABC, abstractmethod

import torch
from torch import nn

import vllm.envs as envs
from vllm import _standin


def ple_offload_enabled(config=None) -> bool:
    if envs.VLLM_PLE_CPU_OFFLOAD:
        return True
    if config is None:
        from vllm.config import get_current_vllm_config_or_none

        config = get_current_vllm_config_or_none()
    kernel = getattr(config, "kernel_config", None)
    return bool(getattr(kernel, "ple_disk_cascade_active", False))


def is_offload_process() -> bool:
    return _standin.offload_process


class PleOffloadLayer(nn.Module, ABC):
    _is_cpu_offloaded = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        original = cls.__dict__.get("__init__")
        if original is None or not callable(original):
            return

        @functools.wraps(original)
        def guarded_init(self, *args, **kwargs):
            if (
                ple_offload_enabled()
                and not envs.VLLM_SM70_QWEN38_HYBRID_PLE
                and not self.offload_keeps_local_tables()
                and not is_offload_process()
            ):
                nn.Module.__init__(self)
                return
            original(self, *args, **kwargs)

        cls.__init__ = guarded_init

    @classmethod
    def offload_keeps_local_tables(cls) -> bool:
        return False

    @classmethod
    def get_target_device(cls) -> torch.device:
        keeps_gpu_tables = envs.VLLM_SM70_QWEN38_HYBRID_PLE or cls.offload_keeps_local_tables()
        if ple_offload_enabled() and not (keeps_gpu_tables and not is_offload_process()):
            return torch.device("cpu")
        return torch.device("cuda", torch.accelerator.current_device_index())

    @abstractmethod
    def forward_impl(self, hidden_states, input_ids, *args, **kwargs):
        raise NotImplementedError

    def get_offload_output_dtype(self, default_dtype: torch.dtype) -> torch.dtype:
        return default_dtype

    def forward(self, hidden_states, input_ids, *args, **kwargs):
        if self._is_cpu_offloaded:
            raise NotImplementedError("the stand-in does not run the cross-process offload wait")
        return self.forward_impl(hidden_states, input_ids, *args, **kwargs)

"""Stand-in of the PLE offload base class, with the engine's constructor-skipping rule.

In a GPU worker with CPU offload on (and neither hybrid PLE nor local tables), the engine
replaces a subclass constructor by a bare nn.Module.__init__: the table lives in the offload
process. The stand-in does the same, so tests see where a check in the constructor cannot fire.
"""

import functools

from torch import nn

import vllm.envs as envs
from vllm import _standin


def ple_offload_enabled(config=None) -> bool:
    return bool(envs.VLLM_PLE_CPU_OFFLOAD)


def is_offload_process() -> bool:
    return _standin.offload_process


class PleOffloadLayer(nn.Module):
    _is_cpu_offloaded = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        original = cls.__dict__.get("__init__")
        if original is None:
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

    def forward(self, hidden_states, input_ids, *args, **kwargs):
        return self.forward_impl(hidden_states, input_ids, *args, **kwargs)

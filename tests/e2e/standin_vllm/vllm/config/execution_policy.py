"""Stand-in typed execution policies: the two an areslp ple_layer.py reads.

Mirrors vllm/config/execution_policy.py of areslp/1Cat-vLLM, the fork of 1CatAI/1Cat-vLLM whose
ple_layer.py at 1af83d8143de5286c13a60ecbdd3024f9f07fa42 imports ``layer_policy`` and
``ple_policy``. The public index holds that module at 48b2e9a6b96aecae1c04c5086ebbca5d15e3abb3
(22295 characters), not at 1af83d81; what the stand-in keeps of it:

- ``ple_policy(cfg=None)`` / ``layer_policy(cfg=None)`` call ``capture_execution_policy``, which
  returns the owner's already-resolved policy of the given config, else of the current config
  (``offload_config.ple``, ``kernel_config.layer_execution``), and only without any config a
  standalone policy resolved from the environment on the spot;
- ``PlePlacementPolicy`` has the fields ``hybrid``, ``cpu`` and ``disk`` (None until resolved)
  with the legacy aliases ``VLLM_SM70_QWEN38_HYBRID_PLE``, ``VLLM_PLE_CPU_OFFLOAD`` and
  ``VLLM_PLE_DISK_OFFLOAD``; ``resolve()`` reads each alias (``envs.environment_variables[name]()``,
  here the stand-in ``vllm.envs``) for every field the user did not set typed (``sources``);
- ``LayerExecutionPolicy.value(field)`` and its ``ple_spec_conv`` field (alias
  ``VLLM_SM70_MTP_PLE_CONV``), which 1af83d81's ple_layer.py reads, are not in 48b2e9a6's text:
  they follow a later version of the same module in the public index (34980 characters).

The pydantic ``@config`` dataclasses, hashing and the forward-context lookup of worker-owned
policies are not reproduced (no test reaches them).
"""

import os
from dataclasses import dataclass, field
from typing import ClassVar

_TRUE = ("1", "true", "yes", "on")


def read_execution_legacy(name: str):
    value = os.environ.get(name)
    return None if value is None else value.strip().lower() in _TRUE


@dataclass
class ExecutionPolicy:
    aliases: ClassVar[dict[str, str]] = {}
    sources: dict = field(default_factory=dict)

    def resolve(self) -> None:
        from vllm import envs

        for name, alias in self.aliases.items():
            if name in self.sources:
                continue
            try:
                value = getattr(envs, alias)
            except AttributeError:
                value = read_execution_legacy(alias)
            setattr(self, name, value)
            self.sources[name] = f"legacy:{alias}"


@dataclass
class PlePlacementPolicy(ExecutionPolicy):
    hybrid: bool | None = None
    cpu: bool | None = None
    disk: bool | None = None

    aliases: ClassVar[dict[str, str]] = {
        "hybrid": "VLLM_SM70_QWEN38_HYBRID_PLE",
        "cpu": "VLLM_PLE_CPU_OFFLOAD",
        "disk": "VLLM_PLE_DISK_OFFLOAD",
    }


@dataclass
class LayerExecutionPolicy(ExecutionPolicy):
    ple_spec_conv: bool | None = None

    aliases: ClassVar[dict[str, str]] = {"ple_spec_conv": "VLLM_SM70_MTP_PLE_CONV"}

    def value(self, name):
        return getattr(self, name)


def resolved(cls):
    policy = cls()
    policy.resolve()
    return policy


def capture_execution_policy(owner: str, cls, cfg=None):
    if cfg is None:
        from vllm.config import get_current_vllm_config_or_none

        cfg = get_current_vllm_config_or_none()
    if cfg is None:
        return resolved(cls)
    config_name, name = owner.split(".")
    return getattr(getattr(cfg, config_name), name)


def layer_policy(cfg=None) -> LayerExecutionPolicy:
    return capture_execution_policy("kernel_config.layer_execution", LayerExecutionPolicy, cfg)


def ple_policy(cfg=None) -> PlePlacementPolicy:
    return capture_execution_policy("offload_config.ple", PlePlacementPolicy, cfg)

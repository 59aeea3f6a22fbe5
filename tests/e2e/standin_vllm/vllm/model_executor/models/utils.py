"""Stand-in AutoWeightsLoader and WeightsMapper, the engine's model-level weight-name path.

Mirrors vllm/model_executor/models/utils.py of 1CatAI/1Cat-vLLM at
ae13773a0deebf583022613c4508e5072cedef91 (2026-08-22), rewritten here (behaviour, not code):
- ``WeightsMapper`` rewrites each checkpoint name by regex, substring, prefix and suffix rules
  (a rule mapping to None drops the weight);
- ``AutoWeightsLoader(module).load_weights(weights, mapper=)`` maps the names, drops those it
  may skip (``skip_prefixes``, ``skip_substrs``), then walks the module tree by the first name
  segment: a child module that has its own ``load_weights`` gets its weights with the prefix
  stripped (and, the iterator being spent, nothing else is loaded for it); a parameter or a
  persistent buffer gets its tensor through its ``weight_loader`` (``default_weight_loader``:
  equal sizes, copy); a name matching nothing raises ValueError unless
  ``ignore_unexpected_prefixes``/``_suffixes`` allow it. The returned set holds full names.
"""

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn


def default_weight_loader(param: torch.Tensor, loaded_weight: torch.Tensor) -> None:
    """vllm/model_executor/model_loader/weight_utils.py ``default_weight_loader``."""
    if param.numel() == 1 and loaded_weight.numel() == 1:
        param.data.copy_(loaded_weight.view(param.shape))
    else:
        assert param.size() == loaded_weight.size(), (
            f"Attempted to load weight ({loaded_weight.size()}) into parameter ({param.size()})"
        )
        param.data.copy_(loaded_weight)


def maybe_prefix(prefix: str, name: str) -> str:
    return name if not prefix else f"{prefix}.{name}"


@dataclass
class WeightsMapper:
    orig_to_new_regex: Mapping[re.Pattern, str | None] = field(default_factory=dict)
    orig_to_new_substr: Mapping[str, str | None] = field(default_factory=dict)
    orig_to_new_prefix: Mapping[str, str | None] = field(default_factory=dict)
    orig_to_new_suffix: Mapping[str, str | None] = field(default_factory=dict)

    def _map_name(self, key: str) -> str | None:
        for pattern, new in self.orig_to_new_regex.items():
            if pattern.search(key):
                if new is None:
                    return None
                key = pattern.sub(new, key)
        for substr, new in self.orig_to_new_substr.items():
            if substr in key:
                if new is None:
                    return None
                key = key.replace(substr, new, 1)
        for prefix, new in self.orig_to_new_prefix.items():
            if key.startswith(prefix):
                if new is None:
                    return None
                key = key.replace(prefix, new, 1)
        for suffix, new in self.orig_to_new_suffix.items():
            if key.endswith(suffix):
                if new is None:
                    return None
                key = new.join(key.rsplit(suffix, 1))
        return key

    def apply(self, weights):
        return ((out, data) for name, data in weights if (out := self._map_name(name)) is not None)


class AutoWeightsLoader:
    ROTARY_EMBEDS_UNUSED_WEIGHTS = [
        "rotary_pos_emb.inv_freq",
        "rotary_emb.inv_freq",
        "rotary_emb.cos_cached",
        "rotary_emb.sin_cached",
    ]

    def __init__(self, module: nn.Module, *, skip_prefixes=None, skip_substrs=None,
                 ignore_unexpected_prefixes=None, ignore_unexpected_suffixes=None) -> None:
        self.module = module
        self.skip_prefixes = skip_prefixes or []
        self.skip_substrs = (skip_substrs or []) + self.ROTARY_EMBEDS_UNUSED_WEIGHTS
        self.ignore_unexpected_prefixes = ignore_unexpected_prefixes or []
        self.ignore_unexpected_suffixes = ignore_unexpected_suffixes or []

    @staticmethod
    def _groupby_prefix(weights):
        parts = ((name.split(".", 1), data) for name, data in weights)
        for prefix, group in itertools.groupby(parts, key=lambda x: x[0][0]):
            yield prefix, (("" if len(p) == 1 else p[1], data) for p, data in group)

    @staticmethod
    def _get_qualname(prefix: str, rest: str) -> str:
        if prefix == "":
            return rest
        if rest == "":
            return prefix
        return ".".join((prefix, rest))

    def _can_skip(self, qualname: str) -> bool:
        return any(qualname.startswith(p) for p in self.skip_prefixes) or any(
            s in qualname for s in self.skip_substrs
        )

    def _can_ignore_unexpected(self, qualname: str) -> bool:
        return any(qualname.startswith(p) for p in self.ignore_unexpected_prefixes) or any(
            qualname.endswith(s) for s in self.ignore_unexpected_suffixes
        )

    def _load_param(self, base_prefix, param, weights):
        for name, data in weights:
            qualname = self._get_qualname(base_prefix, name)
            if self._can_skip(qualname):
                continue
            if name != "":
                if self._can_ignore_unexpected(qualname):
                    continue
                raise ValueError(
                    f"Attempted to load nested weight {qualname!r} into a single parameter {base_prefix!r}"
                )
            getattr(param, "weight_loader", default_weight_loader)(param, data)
            yield qualname

    def _load_module(self, base_prefix, module, weights):
        if module != self.module:
            module_load_weights = getattr(module, "load_weights", None)
            if callable(module_load_weights):
                loaded = module_load_weights(weights)
                if loaded is not None:
                    yield from (self._get_qualname(base_prefix, x) for x in loaded)
        child_modules = dict(module.named_children())
        child_params = dict(module.named_parameters(recurse=False))
        non_persistent = getattr(module, "_non_persistent_buffers_set", set())
        for buf_name, buf in module.named_buffers(recurse=False):
            if buf_name not in child_params and buf_name not in non_persistent:
                child_params[buf_name] = buf
        for child_prefix, child_weights in self._groupby_prefix(weights):
            prefix = self._get_qualname(base_prefix, child_prefix)
            if child_prefix in child_modules:
                if self._can_skip(prefix + "."):
                    continue
                yield from self._load_module(prefix, child_modules[child_prefix], child_weights)
            elif child_prefix in child_params:
                if self._can_skip(prefix):
                    continue
                yield from self._load_param(prefix, child_params[child_prefix], child_weights)
            else:
                if self._can_skip(prefix + ".") or self._can_skip(prefix):
                    continue
                if self._can_ignore_unexpected(prefix + ".") or self._can_ignore_unexpected(prefix):
                    continue
                keys = {maybe_prefix(base_prefix, k) for k, _ in module.named_parameters(recurse=True)}
                raise ValueError(
                    f"There is no module or parameter named {prefix!r} in {self.module._get_name()}. "
                    f"The available parameters belonging to {base_prefix} ({module._get_name()}) are: {keys}"
                )

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]], *, mapper=None) -> set[str]:
        if mapper is not None:
            weights = mapper.apply(weights)
        weights = ((name, w) for name, w in weights if not self._can_skip(name))
        return set(self._load_module("", self.module, weights))

"""Stand-in of the engine's PLE helpers that ple_layer.py imports.

Only copy_ple_embedding_shard_ (used by the FP8 path the tests build) does real work; the
placement helpers of the pre-Ampere split and the cascade are not reached here.

Mirrors vllm/models/qwen4_exp/common/ple.py of 1CatAI/1Cat-vLLM: no whole real file is available here
(commit 04d890fc826002187863162208bf77c9b97bc8dc holds the path); ple_cascade_configured follows the
public index's version of 20105 characters, the rest only provides the names ple_layer.py imports.
"""

from dataclasses import dataclass


PLE_SHARD_PREFIX = "ngram_embedding.shard_"


@dataclass
class PLEDiskSegment:
    start: int = 0
    end: int = 0


@dataclass
class PLEPlacement:
    total_rows: int = 0
    vram_rows: int = 0
    host_rows: int = 0
    disk_rows: int = 0

    @property
    def local_rows(self) -> int:
        return self.vram_rows + self.host_rows


@dataclass
class PLERemotePlacement:
    start: int = 0
    end: int = 0


def copy_ple_embedding_shard_(weight, loaded_weight, *, checkpoint_start, tp_start, tp_end):
    """Copy the rows of one checkpoint shard that fall into [tp_start, tp_end)."""
    lo = max(checkpoint_start, tp_start)
    hi = min(checkpoint_start + loaded_weight.shape[0], tp_end)
    if lo < hi:
        weight[lo - tp_start : hi - tp_start].copy_(
            loaded_weight[lo - checkpoint_start : hi - checkpoint_start]
        )
    return max(0, hi - lo)


def _not_here(*args, **kwargs):
    raise NotImplementedError("not part of the stand-in engine")


copy_ple_embedding_shard_split_ = _not_here
copy_ple_embedding_shard_tiers_ = _not_here
auto_ple_host_budget_bytes = _not_here
available_host_bytes = _not_here
cap_host_budget_bytes = _not_here
kv_cache_bytes_for_max_model_len = _not_here
plan_ple_disk_segments = _not_here
plan_ple_placement = _not_here
ple_disk_mask = _not_here
ple_host_budget_bytes = _not_here
ple_host_reserve_bytes = _not_here
ple_vram_reserve_bytes = _not_here
total_host_bytes = _not_here


def ple_cascade_configured() -> bool:
    """Mirrors vllm/models/qwen4_exp/common/ple.py of 1CatAI/1Cat-vLLM (the public index's version
    of 20105 characters): the overflow cascade is on when the resolved config's kernel_config has
    ``ple_disk_cascade_active`` (set by ``_qwen4exp_ple_cascade_requested``)."""

    from vllm.config import get_current_vllm_config_or_none

    config = get_current_vllm_config_or_none()
    kernel = getattr(config, "kernel_config", None)
    return bool(getattr(kernel, "ple_disk_cascade_active", False))

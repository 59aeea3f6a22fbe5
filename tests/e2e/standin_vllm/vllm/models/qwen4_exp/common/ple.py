"""Stand-in of the engine's PLE helpers that ple_layer.py imports.

copy_ple_embedding_shard_ (used by the FP8 path the tests build) and the host-budget helpers
(which the NVFP4 table reads) do real work; the other placement helpers of the pre-Ampere split
and the cascade are not reached here.

Mirrors vllm/models/qwen4_exp/common/ple.py of 1CatAI/1Cat-vLLM: no whole real file is available here
(commit 04d890fc826002187863162208bf77c9b97bc8dc holds the path); the host-budget helpers follow
that commit, ple_cascade_configured follows the public index's version of 20105 characters, the
rest only provides the names ple_layer.py imports. PLEVocabParallelEmbedding, which
D-G-Dimitrov/vllm 337d3f5ddc8a5b85de8907adfe49c9d9e685703a's ple_layer.py imports from here,
follows vllm-project/vllm 1a3108917e623445d7504c9aecfef3001b5ba287 (that fork's own file is not
in the public index).
"""

import math
from dataclasses import dataclass

import vllm.envs as envs
from vllm import _standin
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

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
kv_cache_bytes_for_max_model_len = _not_here
plan_ple_disk_segments = _not_here
plan_ple_placement = _not_here
ple_disk_mask = _not_here
ple_vram_reserve_bytes = _not_here


def _meminfo_bytes(key):
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def available_host_bytes():
    return _meminfo_bytes("MemAvailable")


def total_host_bytes():
    return _meminfo_bytes("MemTotal")


def cap_host_budget_bytes(*, budget_bytes, available_bytes, reserve_bytes, ranks_sharing_host):
    if ranks_sharing_host <= 0:
        raise ValueError("ranks_sharing_host must be positive")
    share = max(0, available_bytes - reserve_bytes) // ranks_sharing_host
    return min(budget_bytes, share)


def _env_gib_bytes(name):
    value_gib = getattr(envs, name)
    if value_gib is None:
        return None
    if not math.isfinite(value_gib) or value_gib < 0:
        raise ValueError(f"{name} must be finite and non-negative, got {value_gib}")
    return int(value_gib * 1024**3)


def ple_host_budget_bytes():
    return _env_gib_bytes("VLLM_QWEN4EXP_PLE_HOST_GIB")


def ple_host_reserve_bytes(host_total_bytes):
    reserve = _env_gib_bytes("VLLM_QWEN4EXP_PLE_HOST_RESERVE_GIB")
    return host_total_bytes // 4 if reserve is None else reserve


def ple_cascade_configured() -> bool:
    """Mirrors vllm/models/qwen4_exp/common/ple.py of 1CatAI/1Cat-vLLM (the public index's version
    of 20105 characters): the overflow cascade is on when the resolved config's kernel_config has
    ``ple_disk_cascade_active`` (set by ``_qwen4exp_ple_cascade_requested``)."""

    from vllm.config import get_current_vllm_config_or_none

    config = get_current_vllm_config_or_none()
    kernel = getattr(config, "kernel_config", None)
    return bool(getattr(kernel, "ple_disk_cascade_active", False))


class PLEVocabParallelEmbedding(VocabParallelEmbedding):
    """The table class of vllm/models/qwen4_exp/common/ple.py in vllm-project/vllm at
    1a3108917e623445d7504c9aecfef3001b5ba287: VocabParallelEmbedding whose weight_loader also
    takes one checkpoint row shard (``checkpoint_start``: its first row in the whole table) and
    keeps the part of it that falls into this rank's rows. Without ``checkpoint_start`` it loads
    as the base class does."""

    def weight_loader(self, param, loaded_weight, checkpoint_start=None):
        if checkpoint_start is None:
            super().weight_loader(param, loaded_weight)
            return
        indices = self.shard_indices
        copy_ple_embedding_shard_(
            param.data,
            loaded_weight,
            checkpoint_start=checkpoint_start,
            tp_start=indices.org_vocab_start_index,
            tp_end=indices.org_vocab_end_index,
        )

"""NVFP4 row-packed PLE table for Qwen4Exp's n-gram embedding (injected verbatim into the engine).

With ``ple_embedding_dtype: "nvfp4_rowpacked"`` in the model config, ``Qwen4ExpNGramEmbedding``
builds a ``Ple4NvFp4PinnedEmbedding``: its tensor-parallel shard of the table stays as uint8 rows
of D/2 E2M1 code bytes followed by D/16 E4M3 block scales (90 B for D = 160) in pinned host
memory, plus one FP32 global scale. Where the engine release defines a pinned-host budget per
rank (``VLLM_QWEN4EXP_PLE_HOST_GIB``, or the fair share of host memory it derives), the rows past
the budget go to VRAM, as the engine's FP8 table does (``_ple4_host_budget``); the host rows are
pinned exactly (``nvfp4_host``). Lookups run the Triton gather (``ple4_nvfp4_gather``) through
the custom op ``vllm::ple4_nvfp4_pinned_gather``, which resolves the table by layer name at run
time, so no compiled graph holds the table's address. The UVA view is made in
``process_weights_after_loading``, before CUDA-graph capture. The output is in the model dtype,
so the PLE layer passes it through unchanged. The base ``VocabParallelEmbedding.forward`` keeps
the tensor-parallel masking and all-reduce.

Checkpoint tensors (names relative to the n-gram embedding module):
- ``ngram_embedding.shard_<i>.weight`` uint8 [rows_i, D/2 + D/16] (row-packed), or NVIDIA's split
  layout ``shard_<i>.weight`` uint8 [rows_i, D/2] with ``shard_<i>.weight_scale`` E4M3 (or uint8)
  [rows_i, D/16], in any order: both are copied into the code/scale columns of the same rows;
- the global scale as ``ngram_embedding.weight_scale_2`` F32 [1] or as one
  ``shard_<i>.weight_scale_2`` per shard (all equal).
Checkpoint shard i covers rows [i * shard_size, ...) with shard_size =
ceil(org_vocab_size / split_ngram_parts); only the rows of this rank's range are kept.

Rules for this file (its text after the import lines is injected into ``ple_layer.py``): it
imports only names that ``ple_layer.py`` imports (or that ple4patch's import transform adds),
and the gather from ``nvfp4_gather`` (injected beside it); every top-level name starts with
``_ple4_``, ``ple4_`` or ``Ple4``. Engine helpers that only some releases have are looked up at
run time (``_ple4_engine_helper``).
"""

import functools
import inspect
import math
import weakref
from collections.abc import Iterable

import torch

import vllm.envs as envs
from vllm.config import get_current_vllm_config
from vllm.logger import init_logger
from vllm.model_executor.layers.ple_offload_layer import is_offload_process
from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm.utils.platform_utils import is_pin_memory_available
from vllm.utils.torch_utils import (
    direct_register_custom_op,
    get_accelerator_view_from_cpu_tensor,
)

from ple4patch.kernels.nvfp4_gather import ple4_nvfp4_gather
from ple4patch.kernels.nvfp4_host import Ple4NvFp4Tiers, ple4_plan_placement
from ple4patch.kernels.nvfp4_policy import (
    PLE4_POLICY_CASCADE,
    _ple4_policy_command_line,
    ple4_policy_cascade_shown,
    ple4_policy_cli_cascade,
    ple4_policy_refusal,
)

_ple4_logger = init_logger(__name__)

_ple4_NVFP4_DTYPE = "nvfp4_rowpacked"
_ple4_TABLE_PREFIX = "ngram_embedding."
_ple4_SHARD_PREFIX = "ngram_embedding.shard_"
_ple4_GLOBAL_SCALE_NAME = "ngram_embedding.weight_scale_2"
_ple4_MAX_LISTED = 8

# Every live NVFP4 table of this process, by its layer name (the embedding prefix). The gather
# op resolves the table here at run time: a raw address must never enter a compiled graph.
# Weak: a layer that is gone releases its pinned memory.
_ple4_layers: "weakref.WeakValueDictionary[str, Ple4NvFp4PinnedEmbedding]" = weakref.WeakValueDictionary()


def ple4_nvfp4_requested(config) -> bool:
    """Whether the model config asks for the NVFP4 row-packed PLE table."""
    dtype = str(getattr(config, "ple_embedding_dtype", "") or "").removeprefix("torch.")
    return dtype == _ple4_NVFP4_DTYPE


def _ple4_env_flag(name: str) -> bool:
    # Engine releases differ in which variables they know; an unknown one is off.
    try:
        value = getattr(envs, name)
    except AttributeError:
        return False
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def _ple4_engine_helper(name: str):
    """An engine helper that only some releases define in ``ple_layer.py`` (or None)."""
    helper = globals().get(name)
    return helper if callable(helper) else None


def _ple4_cpu_offload_enabled() -> bool:
    if _ple4_env_flag("VLLM_PLE_CPU_OFFLOAD"):
        return True
    try:
        from vllm.model_executor.layers.ple_offload_layer import ple_offload_enabled
    except ImportError:  # releases before the cascade: the variable alone decides
        return False
    return bool(ple_offload_enabled())


def _ple4_cli_cascade_forced() -> str | None:
    """The refusal line when this process runs a vLLM command line that sets
    ``ple_disk_cascade`` true (``kernels.nvfp4_policy``'s reader, as the engine's parser merges
    the kernel config), else None; a command line it cannot read judges nothing."""
    try:
        args = _ple4_policy_command_line()
        cascade = None if args is None else ple4_policy_cli_cascade(args)
    except Exception:  # the engine's own parser accepted these words: judge nothing more
        return None
    if cascade is None or not cascade[0]:
        return None
    return ple4_policy_refusal(PLE4_POLICY_CASCADE, ("explicit-true", ple4_policy_cascade_shown(cascade[1])))


def _ple4_typed_placement(field: str) -> bool:
    """Whether the engine's typed PLE placement turns `field` (hybrid, cpu, disk) on, in releases
    that have one: ``offload_config.ple``, a ``PlePlacementPolicy`` whose fields alias
    VLLM_SM70_QWEN38_HYBRID_PLE, VLLM_PLE_CPU_OFFLOAD and VLLM_PLE_DISK_OFFLOAD, read through
    ``ple_policy()`` (vllm/config/execution_policy.py, 1CatAI/1Cat-vLLM
    108da48ef1a93cdf95a10d9206961bf54b1bdaf0 and areslp/1Cat-vLLM
    48b2e9a6b96aecae1c04c5086ebbca5d15e3abb3, whose ple_layer.py at 1af83d81 decides hybrid and
    disk by it). The start-up policy writes its defaults there (``PolicyDefaults.__setitem__``,
    vllm/config/policy_defaults.py at 1CatAI 18784e02741b8610dbca8192d2045fdeec932600), not into
    the environment, and a user can set them typed, so the variables alone do not tell."""
    try:
        from vllm.config.execution_policy import ple_policy
    except ImportError:  # releases without typed placement: the variables decide
        return False
    except Exception as exc:  # a module that breaks on import: say so rather than guess
        raise RuntimeError(
            f"cannot read the engine's PLE placement (vllm.config.execution_policy: {exc!r}); "
            "fix or reinstall the engine"
        ) from exc
    try:
        return bool(getattr(ple_policy(), field, None))
    except Exception:  # no config resolved here: the variables and ple_offload_enabled() decide
        return False


def _ple4_gguf_active(quant_config) -> bool:
    get_name = getattr(quant_config, "get_name", None)
    if callable(get_name):
        try:
            if str(get_name()).lower() == "gguf":
                return True
        except Exception:  # a config that cannot name itself is not GGUF
            pass
    try:
        from vllm.model_executor.kernels.ple.gguf_pinned import pinned_decode_active
    except ImportError:  # releases without GGUF PLE
        return False
    return bool(pinned_decode_active())


def ple4_nvfp4_check_modes(quant_config=None) -> None:
    """Refuse the PLE modes the NVFP4 row-packed table does not support (fails loudly).

    Runs before anything is allocated: from the embedding constructor and, because
    PleOffloadLayer skips that constructor in GPU workers when CPU offload is on, from the
    guard ``ple4_nvfp4_install`` puts around it.
    """
    what = f"ple_embedding_dtype={_ple4_NVFP4_DTYPE!r}"
    # The disk cascade forced on in the vLLM command line (which a worker process inherits): the
    # patched start-up policy refuses it in the front end; a release without that policy file
    # (its placement in vllm/config/vllm.py) reaches the worker with it, and the line is the same.
    forced = _ple4_cli_cascade_forced()
    if forced is not None:
        raise RuntimeError(forced)
    # Next: an admitted cascade also turns the engine's offload switch on (ple_offload_enabled
    # reads KernelConfig.ple_disk_cascade_active), and its remedy is the kernel-config option.
    cascade = _ple4_engine_helper("ple_cascade_configured")
    if cascade is not None and cascade():
        # Some releases turn the cascade on by a variable instead (Peuqui/1Cat-vLLM 138059c8,
        # vllm/models/qwen4_exp/common/ple.py: ple_cascade_configured() returns
        # bool(envs.VLLM_QWEN4EXP_PLE_DISK)); then the variable is what to change.
        if _ple4_env_flag("VLLM_QWEN4EXP_PLE_DISK"):
            raise RuntimeError(
                f"{what} does not support the PLE disk cascade that VLLM_QWEN4EXP_PLE_DISK turns on: "
                "set VLLM_QWEN4EXP_PLE_DISK=0"
            )
        raise RuntimeError(
            f"{what} does not support the PLE disk cascade the engine admitted at start-up: "
            "pass --kernel-config '{\"ple_disk_cascade\": false}' (or patch the engine's start-up "
            "policy too: `ple4patch apply` on an engine with vllm/platforms/runtime_defaults.py)"
        )
    if _ple4_cpu_offload_enabled() or is_offload_process() or _ple4_typed_placement("cpu"):
        raise RuntimeError(
            f"{what} keeps the PLE table in each GPU worker's pinned host memory and does not "
            "run with the PLE CPU-offload process: set VLLM_PLE_CPU_OFFLOAD=0 "
            "(offload_config.ple.cpu where the release has it; and turn any PLE cascade/disk "
            "offload off)"
        )
    if _ple4_env_flag("VLLM_PLE_DISK_OFFLOAD") or _ple4_typed_placement("disk"):
        raise RuntimeError(
            f"{what} does not support the PLE disk offload lane: set VLLM_PLE_DISK_OFFLOAD=0 "
            "and VLLM_PLE_CPU_OFFLOAD=0 (offload_config.ple.disk and .cpu where the release has them)"
        )
    if _ple4_env_flag("VLLM_SM70_QWEN38_HYBRID_PLE") or _ple4_typed_placement("hybrid"):
        raise RuntimeError(
            f"{what} does not support the hybrid PLE mode: set VLLM_SM70_QWEN38_HYBRID_PLE=0 "
            "and VLLM_PLE_CPU_OFFLOAD=0 (offload_config.ple.hybrid and .cpu where the release has them)"
        )
    if _ple4_gguf_active(quant_config):
        raise RuntimeError(
            f"{what} cannot be combined with a GGUF PLE checkpoint: serve the NVFP4 "
            "checkpoint, or remove ple_embedding_dtype from the model config"
        )


def ple4_nvfp4_check_dim(embedding_dim: int) -> None:
    if embedding_dim <= 0 or embedding_dim % 16:
        raise ValueError(
            f"ple_embedding_dtype={_ple4_NVFP4_DTYPE!r} needs a PLE head dim that is a positive "
            f"multiple of 16 (one E4M3 block scale per 16 values), got {embedding_dim}: "
            "this model cannot use the NVFP4 table; remove ple_embedding_dtype from its config"
        )


def ple4_nvfp4_build_embedding(
    config,
    num_embeddings: int,
    embedding_dim: int,
    *,
    params_dtype: torch.dtype | None,
    padding_size: int,
    prefix: str,
    quant_config=None,
) -> "Ple4NvFp4PinnedEmbedding":
    """The ``ngram_embedding`` module of a Qwen4ExpNGramEmbedding that asked for NVFP4."""
    if not ple4_nvfp4_requested(config):
        raise ValueError(
            f"ple4_nvfp4_build_embedding needs ple_embedding_dtype={_ple4_NVFP4_DTYPE!r}"
        )
    ple4_nvfp4_check_modes(quant_config)
    return Ple4NvFp4PinnedEmbedding(
        num_embeddings,
        embedding_dim,
        params_dtype=params_dtype,
        padding_size=padding_size,
        prefix=prefix,
        split_parts=int(getattr(config, "split_ngram_parts", 512)),
    )


def ple4_nvfp4_install(cls):
    """Check the PLE modes before ``cls.__init__`` runs, even where the engine skips it.

    PleOffloadLayer replaces a subclass constructor by a no-op in GPU workers when CPU offload
    is on; this outer guard still sees the config and refuses NVFP4 there. Idempotent.
    """
    init = cls.__init__
    if getattr(init, "_ple4_guard", False):
        return cls
    try:
        signature = inspect.signature(init)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(init)
    def _ple4_guarded_init(self, config, *args, **kwargs):
        if ple4_nvfp4_requested(config):
            quant_config = kwargs.get("quant_config")
            if quant_config is None and signature is not None:
                try:
                    bound = signature.bind(self, config, *args, **kwargs)
                    quant_config = bound.arguments.get("quant_config")
                except TypeError:
                    quant_config = None
            ple4_nvfp4_check_modes(quant_config)
        init(self, config, *args, **kwargs)

    _ple4_guarded_init._ple4_guard = True
    cls.__init__ = _ple4_guarded_init
    return cls


def _ple4_pin_host_memory() -> bool:
    # Page-locking needs a CUDA driver; on a CPU-only host (the Triton interpreter) the table
    # is plain host memory. Whether pinning is possible at all is checked at construction.
    return torch.cuda.is_available()


def _ple4_vram_device() -> torch.device:
    # The VRAM tier; on a CPU-only host (the Triton interpreter) it is host memory too.
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _ple4_ranks_sharing_host() -> int:
    # As the engine counts them (Qwen4ExpPinnedHostEmbedding._cap_derived_host_budget in
    # vllm/models/qwen4_exp/nvidia/ple_layer.py of 1CatAI/1Cat-vLLM at 15a8d185): the table
    # lives on the first pipeline stage, so its tensor-parallel ranks share this host.
    try:
        parallel = get_current_vllm_config().parallel_config
        ranks = min(int(parallel.tensor_parallel_size), int(parallel.local_world_size))
        return max(1, ranks * int(getattr(parallel, "data_parallel_size_local", 1)))
    except Exception:  # no config in this process: this rank alone
        return 1


def _ple4_host_budget(table_bytes: int) -> tuple[int | None, str]:
    """This rank's pinned-host budget in bytes as the engine release defines it, and its source.

    None: the release has no host budget, so the whole share stays in host memory. The
    release's own functions are used (they live in ple_layer.py's namespace, imported from
    ..common.ple or defined there): ``ple_host_budget_bytes`` (15a8d185) or
    ``_ple_host_budget_bytes`` (036318a0) reads VLLM_QWEN4EXP_PLE_HOST_GIB (GiB, int(x * 2**30))
    and is used as given. Unset, the budget is the rank's fair share of host memory, as the
    release derives it for the FP8 table: ``cap_host_budget_bytes`` of the whole share with
    ``available_host_bytes`` (MemAvailable), the reserve ``ple_host_reserve_bytes`` /
    ``_ple_host_reserve_bytes`` of ``total_host_bytes`` (MemTotal) and the ranks sharing the host,
    i.e. min(share, max(0, MemAvailable - reserve) // ranks). (The FP8 table's derived budget is
    only what does not fit beside the KV cache in VRAM; this table's place is host memory.)
    """
    configured = _ple4_engine_helper("ple_host_budget_bytes") or _ple4_engine_helper("_ple_host_budget_bytes")
    if configured is None:
        return None, "this engine release has no PLE host budget"
    budget = configured()
    if budget is not None:
        return int(budget), "VLLM_QWEN4EXP_PLE_HOST_GIB"
    cap = _ple4_engine_helper("cap_host_budget_bytes")
    available = _ple4_engine_helper("available_host_bytes")
    total = _ple4_engine_helper("total_host_bytes")
    reserve = _ple4_engine_helper("ple_host_reserve_bytes") or _ple4_engine_helper("_ple_host_reserve_bytes")
    if None in (cap, available, total, reserve):
        return None, "this engine release derives no PLE host share"
    available_bytes, total_bytes = available(), total()
    if available_bytes is None or total_bytes is None:
        return None, "host memory unknown (no /proc/meminfo)"
    ranks = _ple4_ranks_sharing_host()
    reserve_bytes = int(reserve(total_bytes))
    share = cap(
        budget_bytes=table_bytes,
        available_bytes=available_bytes,
        reserve_bytes=reserve_bytes,
        ranks_sharing_host=ranks,
    )
    return int(share), (
        f"fair share: {available_bytes / 2**30:.2f} GiB available, {reserve_bytes / 2**30:.2f} GiB "
        f"kept in reserve, {ranks} ranks"
    )


def _ple4_dummy_load() -> bool:
    try:
        load_format = get_current_vllm_config().load_config.load_format
    except Exception:  # no config in this process: not a dummy load
        return False
    return str(getattr(load_format, "value", load_format)).lower().endswith("dummy")


def _ple4_list(indices: list[int]) -> str:
    shown = ", ".join(str(i) for i in indices[:_ple4_MAX_LISTED])
    more = len(indices) - _ple4_MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


class Ple4NvFp4EmbeddingMethod(QuantizeMethodBase):
    """Embedding method of the NVFP4 table: no parameters; lookups go to the layer."""

    def create_weights(self, layer, *args, **kwargs) -> None:
        # The table is not a parameter: it lives in pinned host memory, allocated when the
        # first checkpoint shard arrives (see Ple4NvFp4PinnedEmbedding).
        del layer, args, kwargs

    def apply(self, layer, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        raise NotImplementedError("the NVFP4 PLE table only supports embedding lookups")

    def embedding(self, layer, input_: torch.Tensor) -> torch.Tensor:
        return layer.ple4_lookup(input_)

    def process_weights_after_loading(self, layer) -> None:
        layer.ple4_prepare()


class Ple4NvFp4PinnedEmbedding(VocabParallelEmbedding):
    """This rank's rows of the NVFP4 row-packed PLE table, in pinned host memory.

    Built on the meta device (nothing is allocated up front); the base class supplies the
    tensor-parallel row range (``shard_indices``), the input masking and the all-reduce.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        params_dtype: torch.dtype | None,
        padding_size: int,
        prefix: str,
        split_parts: int,
    ) -> None:
        ple4_nvfp4_check_dim(embedding_dim)
        if split_parts <= 0:
            raise ValueError(f"split_ngram_parts must be positive, got {split_parts}")
        if not is_pin_memory_available():
            raise RuntimeError(
                f"ple_embedding_dtype={_ple4_NVFP4_DTYPE!r} keeps the PLE table in pinned host "
                "memory, but this host cannot pin memory (is_pin_memory_available() is False, "
                "e.g. under WSL or without a CUDA driver): run on a host that can pin memory"
            )
        with torch.device("meta"):
            super().__init__(
                num_embeddings,
                embedding_dim,
                params_dtype=params_dtype,
                padding_size=padding_size,
                prefix=prefix,
                quant_method=Ple4NvFp4EmbeddingMethod(),
            )
        self.layer_name = prefix
        self.ple4_out_dtype = params_dtype if params_dtype is not None else torch.get_default_dtype()
        self.ple4_code_bytes = embedding_dim // 2
        self.ple4_row_bytes = embedding_dim // 2 + embedding_dim // 16
        self.ple4_local_rows = int(self.num_embeddings_per_partition)
        self.ple4_split_parts = int(split_parts)
        # The pinned host tier (the whole table unless a host budget sends rows to VRAM) and the
        # VRAM tier (rows [0, ple4_vram_rows)); both set together on the first shard.
        self.ple4_table: torch.Tensor | None = None
        self.ple4_vram_table: torch.Tensor | None = None
        self.ple4_vram_rows = 0
        self._ple4_tiers: Ple4NvFp4Tiers | None = None
        self.ple4_global_scale: torch.Tensor | None = None
        self._ple4_scale_source: str | None = None
        self._ple4_parts: dict[int, set[str]] = {}
        self._ple4_device_inputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        _ple4_layers[prefix] = self

    # -- loading ---------------------------------------------------------------------------

    def ple4_shard_rows(self, shard_index: int) -> tuple[int, int]:
        """(first row, row count) of checkpoint shard ``shard_index``, as the stock loader."""
        split_parts = self.ple4_split_parts
        org = int(self.org_vocab_size)
        shard_size = (org + split_parts - 1) // split_parts
        start = shard_index * shard_size
        return start, max(0, min(shard_size, org - start))

    def _ple4_allocate(self) -> Ple4NvFp4Tiers:
        if self._ple4_tiers is None:
            rows, row_bytes = self.ple4_local_rows, self.ple4_row_bytes
            budget, source = _ple4_host_budget(rows * row_bytes)
            vram_rows, host_rows = ple4_plan_placement(rows, row_bytes, budget)
            tiers = Ple4NvFp4Tiers(
                rows,
                row_bytes,
                vram_rows,
                device=_ple4_vram_device(),
                pin=_ple4_pin_host_memory() and host_rows > 0,
                what=f"NVFP4 PLE table {self.layer_name}",
            )
            # Rows past this rank's share (vocabulary padding) read as zeros.
            start = self.shard_indices.org_vocab_start_index
            tiers.zero_from(self.shard_indices.org_vocab_end_index - start)
            # Published only once complete.
            self._ple4_tiers = tiers
            self.ple4_table = tiers.host.tensor
            self.ple4_vram_table = tiers.vram
            self.ple4_vram_rows = vram_rows
            _ple4_logger.info(
                "NVFP4 PLE table %s placement: %d of %d rows in device memory (%.3f GiB), %d rows "
                "in %s host memory (%.3f GiB, %d bytes pinned); host budget: %s (%s)",
                self.layer_name,
                vram_rows,
                rows,
                vram_rows * row_bytes / 2**30,
                host_rows,
                "pinned" if tiers.host.pinned else "pageable",
                host_rows * row_bytes / 2**30,
                tiers.host.mapped_bytes if tiers.host.pinned else 0,
                "none" if budget is None else f"{budget} bytes",
                source,
            )
        return self._ple4_tiers

    def ple4_release(self) -> None:
        """Give the table's memory back (unregister, then free the host tier); idempotent."""
        self._ple4_device_inputs.clear()
        tiers, self._ple4_tiers = self._ple4_tiers, None
        self.ple4_table = None
        self.ple4_vram_table = None
        self.ple4_vram_rows = 0
        if tiers is not None:
            tiers.release()

    def ple4_load_rows(
        self,
        name: str,
        shard_index: int,
        part: str,
        loaded: torch.Tensor,
    ) -> None:
        """Copy one checkpoint tensor of shard ``shard_index`` into this rank's rows.

        part: "packed" (uint8 [rows, D/2 + D/16]), "codes" (uint8 [rows, D/2]) or "scales"
        (E4M3 or uint8 [rows, D/16]).
        """
        split_parts = self.ple4_split_parts
        if not 0 <= shard_index < split_parts:
            raise ValueError(
                f"{name}: shard index {shard_index} is outside split_ngram_parts={split_parts}; "
                "check split_ngram_parts in the model config"
            )
        start, rows = self.ple4_shard_rows(shard_index)
        d = self.embedding_dim
        if part == "packed":
            width, columns, dtypes = self.ple4_row_bytes, slice(0, self.ple4_row_bytes), (torch.uint8,)
        elif part == "codes":
            width, columns, dtypes = self.ple4_code_bytes, slice(0, self.ple4_code_bytes), (torch.uint8,)
        elif part == "scales":
            width = d // 16
            columns = slice(self.ple4_code_bytes, self.ple4_row_bytes)
            dtypes = (torch.float8_e4m3fn, torch.uint8)
        else:
            raise ValueError(f"{name}: unknown NVFP4 table part {part!r}")
        if loaded.dtype not in dtypes:
            raise ValueError(
                f"{name}: expected dtype {' or '.join(str(t) for t in dtypes)} for the NVFP4 "
                f"PLE table ({part}), got {loaded.dtype}: the checkpoint does not hold an NVFP4 "
                f"table; fix ple_embedding_dtype in the model config"
            )
        if tuple(loaded.shape) != (rows, width):
            raise ValueError(
                f"{name}: expected shape {(rows, width)} (shard {shard_index} of "
                f"{split_parts}, D={d}), got {tuple(loaded.shape)}: check split_ngram_parts "
                "and ple_embed_dim against the checkpoint"
            )
        parts = self._ple4_parts.setdefault(shard_index, set())
        if (part == "packed" and parts & {"codes", "scales"}) or (
            part != "packed" and "packed" in parts
        ):
            raise ValueError(
                f"{name}: shard {shard_index} arrived both row-packed and in the split layout; "
                "the checkpoint must use one layout per shard"
            )
        tiers = self._ple4_allocate()
        if loaded.dtype != torch.uint8:
            loaded = loaded.view(torch.uint8)
        tp_start = self.shard_indices.org_vocab_start_index
        tp_end = self.shard_indices.org_vocab_end_index
        lo, hi = max(start, tp_start), min(start + rows, tp_end)
        if lo < hi:
            tiers.copy_rows(lo - tp_start, loaded[lo - start : hi - start], columns)
        parts.add(part)

    def ple4_set_global_scale(self, name: str, loaded: torch.Tensor) -> None:
        if loaded.numel() != 1:
            raise ValueError(
                f"{name}: expected the NVFP4 global scale as one FP32 value, got shape "
                f"{tuple(loaded.shape)}"
            )
        value = loaded.detach().to(device="cpu", dtype=torch.float32).reshape(1)
        scalar = float(value.item())
        if not math.isfinite(scalar) or scalar <= 0.0:
            raise ValueError(
                f"{name}: the NVFP4 global scale must be finite and positive, got {scalar!r}: "
                "the checkpoint is damaged or not ModelOpt NVFP4"
            )
        if self.ple4_global_scale is not None and not torch.equal(self.ple4_global_scale, value):
            raise ValueError(
                f"{name}: global scale {scalar!r} differs from {self._ple4_scale_source} "
                f"({float(self.ple4_global_scale.item())!r}); one table has one global scale"
            )
        if self.ple4_global_scale is None:
            self.ple4_global_scale = value
            self._ple4_scale_source = name
        self._ple4_device_inputs.clear()

    def ple4_missing(self) -> list[str]:
        """What the checkpoint has not delivered yet (empty when the table is complete)."""
        split_parts = self.ple4_split_parts
        missing_shards = []
        for index in range(split_parts):
            if self.ple4_shard_rows(index)[1] == 0:
                continue
            parts = self._ple4_parts.get(index, set())
            if "packed" not in parts and not {"codes", "scales"} <= parts:
                missing_shards.append(index)
        problems = []
        if missing_shards:
            problems.append(
                f"shards {_ple4_list(missing_shards)} of {split_parts} "
                f"({_ple4_SHARD_PREFIX}<i>.weight, plus .weight_scale in the split layout)"
            )
        if self.ple4_global_scale is None:
            problems.append(
                f"the global scale ({_ple4_GLOBAL_SCALE_NAME} or {_ple4_SHARD_PREFIX}<i>.weight_scale_2)"
            )
        return problems

    # -- serving ---------------------------------------------------------------------------

    def ple4_prepare(self) -> None:
        """After loading: check completeness, then make the UVA view before graph capture."""
        if self.ple4_table is None and self.ple4_global_scale is None and _ple4_dummy_load():
            _ple4_logger.warning("NVFP4 PLE table %s: dummy weights (zeros)", self.layer_name)
            self._ple4_allocate().zero_from(0)
            self.ple4_global_scale = torch.ones(1, dtype=torch.float32)
            self._ple4_scale_source = "dummy load"
        elif missing := self.ple4_missing():
            self.ple4_release()  # loading failed: the pinned memory goes back now
            raise RuntimeError(
                f"NVFP4 PLE table {self.layer_name}: loading ended without "
                + " and ".join(missing)
                + ": the checkpoint is incomplete or its PLE table is not NVFP4; re-export it"
            )
        if torch.cuda.is_available():
            self.ple4_device_inputs(torch.device("cuda", torch.cuda.current_device()))

    def ple4_device_inputs(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(table, global scale) as the gather reads them on ``device``."""
        if self.ple4_table is None or self.ple4_global_scale is None:
            raise RuntimeError(
                f"NVFP4 PLE table {self.layer_name} was looked up before its weights were "
                "loaded and process_weights_after_loading ran"
            )
        if device.type != "cuda":
            return self.ple4_table, self.ple4_global_scale
        index = torch.cuda.current_device() if device.index is None else device.index
        inputs = self._ple4_device_inputs.get(index)
        if inputs is None:
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    f"NVFP4 PLE table {self.layer_name}: the UVA view must be made before CUDA "
                    "graph capture (process_weights_after_loading did not run)"
                )
            with torch.cuda.device(index):
                if self.ple4_table.numel():
                    view = get_accelerator_view_from_cpu_tensor(self.ple4_table)
                else:  # every row in VRAM: no host tier to map
                    view = self.ple4_table
                scale = self.ple4_global_scale.to(torch.device("cuda", index))
            inputs = (view, scale)
            self._ple4_device_inputs[index] = inputs
        return inputs

    def ple4_lookup(self, input_: torch.Tensor) -> torch.Tensor:
        ids = input_.reshape(-1)
        if ids.dtype != torch.int64:
            ids = ids.long()
        output = torch.empty(
            (ids.numel(), self.embedding_dim), dtype=self.ple4_out_dtype, device=input_.device
        )
        torch.ops.vllm.ple4_nvfp4_pinned_gather(
            ids.contiguous(), output, self.layer_name, self.embedding_dim
        )
        return output.reshape(*input_.shape, self.embedding_dim)


def ple4_nvfp4_active(module) -> bool:
    """Whether a Qwen4ExpNGramEmbedding was built with the NVFP4 table."""
    return isinstance(getattr(module, "ngram_embedding", None), Ple4NvFp4PinnedEmbedding)


def _ple4_classify(name: str) -> tuple[int | None, str] | None:
    """(shard index or None, kind) of an NVFP4 table tensor, or None for any other weight."""
    if name == _ple4_GLOBAL_SCALE_NAME:
        return None, "global"
    if name.startswith(_ple4_SHARD_PREFIX):
        index_text, _, leaf = name[len(_ple4_SHARD_PREFIX) :].partition(".")
        if not index_text.isdigit():
            return None  # not a table shard: the stock loader decides
        kind = {"weight": "weight", "weight_scale": "scales", "weight_scale_2": "global"}.get(leaf)
        if kind is None:
            raise ValueError(
                f"{name}: unexpected tensor of the NVFP4 PLE table (expected .weight, "
                ".weight_scale or .weight_scale_2 per shard)"
            )
        return int(index_text), kind
    if name in ("ngram_embedding.weight", "ngram_embedding.weight_scale"):
        raise ValueError(
            f"{name}: an unsplit or FP8 PLE table tensor, but the model config asks for "
            f"ple_embedding_dtype={_ple4_NVFP4_DTYPE!r}: use the NVFP4 checkpoint or set "
            "ple_embedding_dtype to the checkpoint's format"
        )
    return None


def ple4_nvfp4_load_weights(
    module,
    weights: Iterable[tuple[str, torch.Tensor]],
    stock_load_weights,
) -> set[str]:
    """``Qwen4ExpNGramEmbedding.load_weights`` for the NVFP4 table.

    Takes the table's tensors and hands every other weight (hash buffers, ...) to the stock
    loader. Completeness is checked once loading has ended (process_weights_after_loading),
    because the engine may call this several times with parts of the checkpoint.
    """
    embedding = module.ngram_embedding
    loaded: set[str] = set()
    others: list[tuple[str, torch.Tensor]] = []
    for name, tensor in weights:
        kind = _ple4_classify(name)
        if kind is None:
            others.append((name, tensor))
            continue
        shard_index, what = kind
        if what == "global":
            embedding.ple4_set_global_scale(name, tensor)
        elif what == "scales":
            embedding.ple4_load_rows(name, shard_index, "scales", tensor)
        else:
            code_only = tensor.dim() == 2 and tensor.shape[-1] == embedding.ple4_code_bytes
            part = "codes" if code_only else "packed"
            embedding.ple4_load_rows(name, shard_index, part, tensor)
        loaded.add(name)
    if others:
        loaded.update(stock_load_weights(others))
    return loaded


def ple4_nvfp4_pinned_gather(
    input_ids: torch.Tensor,
    output: torch.Tensor,
    layer_name: str,
    embedding_dim: int,
) -> None:
    """Custom op body: gather + decode rows of the NVFP4 table ``layer_name`` into ``output``."""
    if input_ids.numel() == 0:
        return
    layer = _ple4_layers.get(layer_name)
    if layer is None:
        raise RuntimeError(f"no NVFP4 PLE table is registered under the layer name {layer_name!r}")
    table, global_scale = layer.ple4_device_inputs(output.device)
    ple4_nvfp4_gather(
        table,
        input_ids,
        global_scale,
        embedding_dim,
        out_dtype=output.dtype,
        out=output,
        device_table=layer.ple4_vram_table if layer.ple4_vram_rows else None,
    )


def ple4_nvfp4_pinned_gather_fake(
    input_ids: torch.Tensor,
    output: torch.Tensor,
    layer_name: str,
    embedding_dim: int,
) -> None:
    return


direct_register_custom_op(
    op_name="ple4_nvfp4_pinned_gather",
    op_func=ple4_nvfp4_pinned_gather,
    mutates_args=["output"],
    fake_impl=ple4_nvfp4_pinned_gather_fake,
)

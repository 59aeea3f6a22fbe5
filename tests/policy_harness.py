"""Run a (patched or stock) engine policy file against fake engine modules: the names the policy
imports, with the semantics of 1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6.

`PolicyDefaults` mirrors vllm/config/policy_defaults.py (18784e02): ``name in defaults`` is true
for an explicit setting (here: the environment) or a default set during this start-up,
``value(name)`` is the setting as a bool, ``defaults[name] = raw`` records a default. `load_policy`
execs the file's text as ``vllm.platforms.runtime_defaults`` with those fakes in sys.modules.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

_TRUE = ("1", "true", "yes", "on")


class PolicyDefaults:
    def __init__(self, cfg, environ=None):
        import os

        self.cfg = cfg
        self.raw = dict(os.environ if environ is None else environ)
        self.set: dict[str, str] = {}
        self.finished = False

    def __contains__(self, name):
        return name in self.set or name in self.raw

    def value(self, name):
        raw = self.set.get(name, self.raw.get(name, "0"))
        return str(raw).strip().lower() in _TRUE

    def __getitem__(self, name):
        return self.set.get(name, self.raw[name])

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __setitem__(self, name, raw):
        self.set[name] = raw

    def finish(self):
        self.finished = True


@dataclass
class KernelConfig:
    ple_disk_cascade: bool = True
    ple_disk_cascade_active: bool = False
    ple_disk_cascade_reason: str | None = None


class ParallelConfig(SimpleNamespace):
    def ensure_ple_offload_ipc_path(self):
        self._ple_offload_ipc_path = "ipc://ple"


def engine_args_resolve(model: str, load_format: str = "auto", quantization=None) -> tuple:
    """(load_format, quantization) as ``EngineArgs.create_model_config`` leaves them
    (``vllm/engine/arg_utils.py`` of 1CatAI/1Cat-vLLM ae13773a, lines 1582-1584: both become
    ``"gguf"`` when ``is_gguf(model)``; ``vllm/transformers_utils/gguf_utils.py`` there: a local
    file named ``*.gguf`` or starting with the ``GGUF`` magic, or a ``repo/name:QUANT`` name)."""
    import re
    from pathlib import Path

    path = Path(model)
    local = path.is_file() and (path.suffix == ".gguf" or path.read_bytes()[:4] == b"GGUF")
    remote = re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*:[A-Za-z0-9_+-]+", model)
    if local or (remote and model.rsplit(":", 1)[1].upper().startswith(("Q", "IQ", "F16", "BF16", "F32"))):
        return "gguf", "gguf"
    return load_format, quantization


def make_cfg(dtype: str | None, *, load_format="auto", quantization=None, model="/models/nvfp4") -> SimpleNamespace:
    """A config on the SM70 Qwen3.8 dual-compile lane whose text config requests `dtype`."""
    text = SimpleNamespace(ple_layer_ids=[0, 1])
    if dtype is not None:
        text.ple_embedding_dtype = dtype
    import torch

    return SimpleNamespace(
        model_config=SimpleNamespace(hf_text_config=text, hf_config=text, dtype=torch.float16,
                                     quantization=quantization, model=model),
        speculative_config=None,
        parallel_config=ParallelConfig(pipeline_parallel_size=1, data_parallel_backend="mp",
                                       data_parallel_size_local=1, data_parallel_size=1,
                                       prefill_context_parallel_size=1, nnodes=1, use_ubatching=False,
                                       _ple_offload_ipc_path=""),
        load_config=SimpleNamespace(load_format=load_format),
        kernel_config=KernelConfig(),
        weight_transfer_config=None,
        compilation_config=SimpleNamespace(runtime=SimpleNamespace(aot_compile=True)),
    )


def install_fakes(monkeypatch, environ) -> None:
    """The engine modules the policy imports (lazily or at the top), as fakes."""

    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    logger = SimpleNamespace(info_once=lambda *a, **k: None, warning_once=lambda *a, **k: None,
                             info=lambda *a, **k: None, warning=lambda *a, **k: None)
    module("vllm", __path__=[])
    module("vllm.logger", init_logger=lambda name: logger)
    module("vllm.config", __path__=[], ParallelConfig=ParallelConfig, VllmConfig=object)
    module("vllm.config.compilation", CompilationMode=SimpleNamespace(), CUDAGraphMode=SimpleNamespace())
    module("vllm.config.policy_defaults", PolicyDefaults=lambda cfg: PolicyDefaults(cfg, environ))
    module("vllm.platforms", __path__=[], current_platform=SimpleNamespace(is_cuda=lambda: True))
    module("vllm.model_executor", __path__=[])
    module("vllm.model_executor.models", __path__=[])
    module(
        "vllm.model_executor.models.runtime_defaults",
        _is_sm70_qwen38_decode_compile_contract=lambda *a: True,
        _is_sm70_dflash2_verifier_contract=lambda *a: False,
        ple_storage_rejection=lambda cfg: None,  # the storage is accepted
    )


def load_policy(text: str, monkeypatch, environ=None) -> types.ModuleType:
    """The policy file's text as a module, its engine imports faked."""
    environ = {"VLLM_SM70_QWEN38_DUAL_COMPILE": "1", **(environ or {})}
    for key in list(__import__("os").environ):
        if key.startswith(("VLLM_PLE", "VLLM_SM70")):
            monkeypatch.delenv(key)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    install_fakes(monkeypatch, environ)
    mod = types.ModuleType("vllm.platforms.runtime_defaults")
    exec(compile(text, "runtime_defaults.py", "exec"), mod.__dict__)
    return mod

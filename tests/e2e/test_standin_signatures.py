"""The stand-in `vllm` against the real signatures, and the stand-in behaviours the issue names.

tests/data/engine_signatures.json (made by tools/record_engine_signatures.py from the real
1Cat-vLLM sources: a mirror of 1CatAI/1Cat-vLLM at ae13773a, the real files stored in
tests/data/engines and, for the names only a fork's file imports, that fork's modules as the
public index holds them) records every engine name the injected code and the real ple_layer.py files
that the e2e tests import (those the transform patches) import. Each stand-in function must take the same parameters (name, kind, whether it has
a default) and each stand-in class with a recorded ``__init__`` the same constructor. Names
without a recorded source are only required to exist in the stand-in.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tools import engine_files  # noqa: E402
import harness as h  # noqa: E402

RECORD = Path(__file__).resolve().parents[1] / "data" / "engine_signatures.json"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from record_engine_signatures import INJECTED, NGRAM_PACKAGE, RUNTIME_LOOKUPS, engine_texts, imported_names  # noqa: E402

ENTRIES = json.loads(RECORD.read_text(encoding="utf-8"))["names"]


def _standin(module: str, name: str):
    h.standin_vllm()
    mod = importlib.import_module(module)
    if not name:
        return mod
    if not hasattr(mod, name):  # a submodule imported by name (from vllm.x import submodule)
        importlib.import_module(f"{module}.{name}")
    return getattr(mod, name)


def _params(func, drop_self: bool) -> list[list]:
    params = list(inspect.signature(func).parameters.values())
    if drop_self and params:
        params = params[1:]
    return [[p.name, p.kind.name, p.default is not inspect.Parameter.empty] for p in params]


def test_the_record_covers_every_name_the_real_files_and_the_injected_code_import():
    names = set(RUNTIME_LOOKUPS)
    for text in engine_texts():  # the real files the e2e tests import (a refused one never is)
        names |= imported_names(text, f"{NGRAM_PACKAGE}.ple_layer")
    repo = Path(__file__).resolve().parents[2]
    for rel in INJECTED:
        names |= imported_names((repo / rel).read_text(encoding="utf-8"), "ple4patch.kernels." + Path(rel).stem)
    recorded = {(e["module"], e["name"]) for e in ENTRIES}
    missing = sorted(names - recorded)
    assert not missing, f"re-run tools/record_engine_signatures.py: not recorded: {missing}"


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['module']}.{e['name']}" for e in ENTRIES])
def test_standin_matches_the_real_signature(entry):
    obj = _standin(entry["module"], entry["name"])  # every recorded name exists in the stand-in
    kind = entry["kind"]
    if kind == "function":
        assert callable(obj) and not isinstance(obj, type)
        assert _params(obj, False) == entry["params"], f"stand-in drifts from {entry['source']}"
    elif kind == "class":
        assert isinstance(obj, type)
        if entry["init"] is not None:
            assert _params(obj.__init__, True) == entry["init"], f"stand-in drifts from {entry['source']}"


STANDIN_ROOT = Path(__file__).resolve().parent / "standin_vllm"
STANDIN_MODULES = sorted(
    p for p in STANDIN_ROOT.rglob("*.py") if p.name not in ("__init__.py", "_standin.py")
)


@pytest.mark.parametrize("path", STANDIN_MODULES, ids=[str(p.relative_to(STANDIN_ROOT)) for p in STANDIN_MODULES])
def test_each_standin_module_names_the_real_file_and_commit_it_mirrors(path):
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert "1CatAI/1Cat-vLLM" in doc, f"{path.name}: name the real file it mirrors"
    assert re.search(r"[0-9a-f]{40}", doc), f"{path.name}: name the commit (or the commit that holds the path)"


# -- behaviours, as in the real sources --------------------------------------------------------


def test_registration_is_for_the_platform_dispatch_key_and_once_per_process():
    """vllm/utils/torch_utils.py @ae13773a: define once, impl for dispatch_key only."""
    from vllm.utils import torch_utils

    def _standin_probe_op(x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(x)

    torch_utils.new_process()
    torch_utils.direct_register_custom_op("standin_probe_cuda_only", _standin_probe_op,
                                          mutates_args=["out"], dispatch_key="CUDA")
    with pytest.raises(RuntimeError, match="multiple times"):
        torch_utils.direct_register_custom_op("standin_probe_cuda_only", _standin_probe_op,
                                              mutates_args=["out"], dispatch_key="CUDA")
    x = torch.ones(3)
    with pytest.raises(NotImplementedError):  # the dispatcher: no CPU kernel for a CUDA-only op
        torch.ops.vllm.standin_probe_cuda_only(x, torch.empty(3))
    torch_utils.new_process()  # a new engine process may register the name again
    torch_utils.direct_register_custom_op("standin_probe_cuda_only", _standin_probe_op,
                                          mutates_args=["out"], dispatch_key="CUDA")


def test_config_context_as_in_the_engine():
    from vllm.config import VllmConfig, get_current_vllm_config, get_current_vllm_config_or_none, set_current_vllm_config

    assert get_current_vllm_config_or_none() is None
    with pytest.raises(AssertionError, match="Current vLLM config is not set"):
        get_current_vllm_config()
    config = VllmConfig()
    with set_current_vllm_config(config):
        assert get_current_vllm_config() is config
    assert get_current_vllm_config_or_none() is None


def test_placement_switches_read_the_resolved_config(monkeypatch):
    from vllm.model_executor.kernels.ple.gguf_pinned import pinned_decode_active
    from vllm.model_executor.layers.ple_offload_layer import ple_offload_enabled
    from vllm.models.qwen4_exp.common.ple import ple_cascade_configured

    monkeypatch.delenv("VLLM_PLE_CPU_OFFLOAD", raising=False)
    assert not (ple_offload_enabled() or ple_cascade_configured() or pinned_decode_active())
    with h.engine_config(ple_disk_cascade_active=True) as config:
        assert ple_offload_enabled() and ple_cascade_configured() and not pinned_decode_active()
        assert ple_offload_enabled(config)
    with h.engine_config(ple_pinned_decode_active=True) as config:
        assert pinned_decode_active() and pinned_decode_active(config) and not ple_offload_enabled()
    monkeypatch.setenv("VLLM_PLE_CPU_OFFLOAD", "1")
    assert ple_offload_enabled() and not ple_cascade_configured()


def test_model_level_weight_names_reach_the_embedding_loader():
    """The HF names go through the CondGen/CausalLM mappers and AutoWeightsLoader; an unknown
    name fails as AutoWeightsLoader does; MTP tensors are skipped."""
    from vllm.models.qwen4_exp.nvidia.model import Qwen4ExpForConditionalGeneration

    seen = []

    class Embedding(torch.nn.Module):
        def __init__(self, config, dim, dense_id, tokens, reqs, prefix, **kwargs):
            super().__init__()
            self.prefix = prefix

        def load_weights(self, weights):
            got = list(weights)
            seen.extend(got)
            return {name for name, _ in got}

    module = type(sys)("fake_ple_layer")
    module.Qwen4ExpNGramEmbedding = Embedding
    config = h.make_config()
    config.ple_layer_ids, config.ple_embed_dim = [2], 128
    model = Qwen4ExpForConditionalGeneration(module, config)
    emb = model.language_model.model.layers[1].ple.ple_embedding
    assert emb.prefix == "model.language_model.model.layers.1.ple.ple_embedding"
    loaded = model.load_weights(iter(h.hf_checkpoint([("ngram_embedding.shard_0.weight", torch.zeros(2))])))
    assert [name for name, _ in seen] == ["ngram_embedding.shard_0.weight"]
    assert "language_model.model.layers.1.ple.ple_embedding.ngram_embedding.shard_0.weight" in loaded
    assert model.language_model.lm_head.weight.eq(2).all()
    with pytest.raises(ValueError, match="There is no module or parameter named"):
        model.load_weights(iter([("model.language_model.layers.0.nothing.weight", torch.zeros(1))]))


@pytest.mark.skipif(h.HAS_CUDA, reason="on a CUDA machine the GPU tests run the op for real")
def test_on_the_cuda_platform_a_cpu_lookup_is_refused(tmp_path):
    """In the engine the op is registered for CUDA only: a lookup with CPU tensors on the V100
    platform does not run. Shown in a fresh process whose stand-in platform is CUDA (here the
    CPU tests register for the CPU key, where the engine's CPU platform would)."""
    engine = engine_files.standin_file()
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import harness as h
        h.standin_vllm()
        from vllm.platforms import current_platform
        current_platform.dispatch_key = "CUDA"
        from ple4patch.transform import patch_source
        module = h.import_engine_file(patch_source(open({str(engine)!r}).read()), __import__("pathlib").Path({str(tmp_path)!r}), "cuda_only")
        try:
            torch.ops.vllm.ple4_nvfp4_pinned_gather(torch.zeros(1, dtype=torch.int64), torch.empty(1, 32, dtype=torch.float16), "x", 32)
        except NotImplementedError as exc:
            print("refused:", str(exc).splitlines()[0])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused:" in proc.stdout and "CPU" in proc.stdout


def test_execution_policy_is_the_one_resolved_with_the_config(monkeypatch):
    """vllm/config/execution_policy.py of areslp/1Cat-vLLM @48b2e9a6: ``ple_policy()`` is the
    current config's ``offload_config.ple``, resolved from the legacy variables when the config
    was built (a later change of the variable does not reach it); without a config a standalone
    policy is resolved on the spot; a field set typed keeps its value."""
    h.standin_vllm()
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.config.execution_policy import PlePlacementPolicy, layer_policy, ple_policy

    monkeypatch.setenv("VLLM_PLE_DISK_OFFLOAD", "1")
    monkeypatch.delenv("VLLM_PLE_CPU_OFFLOAD", raising=False)
    assert ple_policy().disk is True and ple_policy().cpu is False
    config = VllmConfig()
    monkeypatch.setenv("VLLM_PLE_DISK_OFFLOAD", "0")
    with set_current_vllm_config(config):
        assert ple_policy() is config.offload_config.ple and ple_policy().disk is True
        assert layer_policy() is config.kernel_config.layer_execution
    assert ple_policy().disk is False
    typed = PlePlacementPolicy(cpu=True, sources={"cpu": "typed"})
    typed.resolve()
    assert typed.cpu is True and typed.disk is False


def test_modelopt_exclusion_and_weight_attrs_as_in_the_engine():
    """modelopt.py of vllm-project/vllm @00155cde (is_layer_excluded: exact, substring, wildcard)
    and vllm/model_executor/utils.py @ae13773a (set_weight_attrs never overwrites)."""
    h.standin_vllm()
    from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config
    from vllm.model_executor.utils import set_weight_attrs

    prefix = "model.layers.1.ple.ple_embedding.ngram_embedding"
    assert not ModelOptNvFp4Config("NVFP4", True).is_layer_excluded(prefix)
    for entry in (prefix, "ple_embedding", "*.ngram_embedding"):
        assert ModelOptNvFp4Config("NVFP4", True, None, [entry]).is_layer_excluded(prefix), entry
    assert not ModelOptNvFp4Config("NVFP4", True, None, ["lm_head"]).is_layer_excluded(prefix)
    with pytest.raises(ValueError, match="Unsupported ModelOpt NVFP4 quant_algo"):
        ModelOptNvFp4Config("FP8")
    weight = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    set_weight_attrs(weight, {"output_dim": 0})
    set_weight_attrs(weight, None)
    assert weight.output_dim == 0
    with pytest.raises(AssertionError, match="Overwriting existing tensor attribute: output_dim"):
        set_weight_attrs(weight, {"output_dim": 1})


def test_pin_startup_options_refuse_bad_values(monkeypatch):
    """ple_host_startup.py of cookys/1Cat-vLLM @3e1030cd: 0/1 switches, positive timeout."""
    h.standin_vllm()
    from vllm.models.qwen4_exp.common.ple_host_startup import PinStartupOptions

    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_PIN_SERIALIZE", "1")
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_PIN_PAUSE_MS", "250")
    options = PinStartupOptions.from_env()
    assert options.serialize and not options.drop_cache and options.pause_s == 0.25
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_PIN_DROP_CACHE", "yes")
    with pytest.raises(ValueError, match="VLLM_QWEN4EXP_PLE_PIN_DROP_CACHE must be 0 or 1"):
        PinStartupOptions.from_env()
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_PIN_DROP_CACHE", "0")
    monkeypatch.setenv("VLLM_QWEN4EXP_PLE_PIN_TIMEOUT_S", "0")
    with pytest.raises(ValueError, match="timeout must be finite and positive"):
        PinStartupOptions.from_env()


@pytest.mark.parametrize("value,on", [(None, False), ("", False), ("0", False), ("off", False), ("none", False),
                                      ("bogus", False), ("1", True), (" ON ", True), ("subgraph", True), ("aot", True)])
def test_compile_cache_switch(value, on):
    """sx_compile_cache.py of Qixiao02/1Cat-vLLM @7ee70bdc: SX_OPT_COMPILE_CACHE off unless 1/on/true/
    yes/subgraph/aot (an unknown value is off); a baked constant is kept as its repr."""
    h.standin_vllm()
    from vllm.compilation import sx_compile_cache

    environ = {} if value is None else {"SX_OPT_COMPILE_CACHE": value}
    assert sx_compile_cache.compile_cache_enabled(environ) is on
    sx_compile_cache.register_baked_constant("ple_rows:x", (3, 4))
    assert sx_compile_cache.baked_constants()["ple_rows:x"] == "(3, 4)"


def test_decode_graph_semantics_are_legacy_unless_dual_compile(monkeypatch):
    """sm70_decode_graph.py of rapatel0/1Cat-vLLM @a223f046 (1CatAI 22ab8e07's ple_layer.py calls
    use_sm70_decode_graph_semantics()): legacy semantics with VLLM_SM70_QWEN38_DUAL_COMPILE off
    (its default); with it on, only inside the decode-graph phase."""
    h.standin_vllm()
    from vllm.compilation.sm70_decode_graph import (
        is_sm70_decode_graph_compiling,
        sm70_decode_graph_compilation,
        use_sm70_decode_graph_semantics,
    )

    monkeypatch.delenv("VLLM_SM70_QWEN38_DUAL_COMPILE", raising=False)
    assert use_sm70_decode_graph_semantics() and not is_sm70_decode_graph_compiling()
    monkeypatch.setenv("VLLM_SM70_QWEN38_DUAL_COMPILE", "1")
    assert not use_sm70_decode_graph_semantics()
    with sm70_decode_graph_compilation():
        assert is_sm70_decode_graph_compiling() and use_sm70_decode_graph_semantics()
    assert not is_sm70_decode_graph_compiling() and not use_sm70_decode_graph_semantics()


def test_forward_kernel_config_is_the_current_configs_or_none():
    """1CatAI 22ab8e07's ple_layer.py reads None as the defaults; test_ple_prefill_gate.py @4967ee9d
    toggles config.kernel_config.prefill_ple_compact_gate under the config's forward context."""
    h.standin_vllm()
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.forward_context import get_forward_kernel_config_or_none

    assert get_forward_kernel_config_or_none() is None
    config = VllmConfig()
    with set_current_vllm_config(config):
        policy = get_forward_kernel_config_or_none()
        assert policy is config.kernel_config
        assert policy.prefill_ple_short_conv and policy.prefill_ple_compact_gate
    assert get_forward_kernel_config_or_none() is None


def test_prefill_gate_and_conv_refuse_off_sm70_and_their_kernels_are_not_run():
    """ops/ple_prefill_gate.py and ops/ple_prefill_conv.py of 1CatAI @22ab8e07: off an SM70 CUDA
    device both admission checks answer "requires_sm70", so ple_layer.py keeps its own path."""
    h.standin_vllm()
    from vllm.models.qwen4_exp.nvidia.ops import ple_prefill_conv as conv
    from vllm.models.qwen4_exp.nvidia.ops import ple_prefill_gate as gate

    key, value = torch.zeros(3, 10240, dtype=torch.float16), torch.zeros(3, 2560, dtype=torch.float16)
    norms = tuple(torch.zeros(10240) for _ in range(3))
    assert gate.prefill_gate_reason(key, key, value, norms, 4) == "requires_sm70"
    x, state, weight = torch.zeros(512, 8, dtype=torch.float16), torch.zeros(2, 8, 6), torch.zeros(8, 4)
    assert conv.prefill_conv_reason(x, state, weight, 1, 2) == "requires_sm70"
    gate.report_prefill_gate_fallback("requires_sm70")
    with pytest.raises(NotImplementedError, match="not reproduced"):
        gate.prepare_prefill_gate(key, key, value, norms, 4, 1e-6)
    with pytest.raises(NotImplementedError, match="not reproduced"):
        conv.prefill_conv(x, state, weight, None, None, None, 2, None)

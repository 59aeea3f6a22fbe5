"""The policy patch of vllm/platforms/runtime_defaults.py: goldens, anchors, and what the patched
policy decides (an NVFP4 request wins over automatic PLE placement; explicit conflicts refused).

The stand-in policy (tests/fixtures/standin_engine) and, when stored, the real file of
1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6 (tests/data/engines/main-51c0f972)
run against the fake engine modules of tests/policy_harness.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import policy_harness as ph
from ple4patch.errors import TransformError
from ple4patch.kernels import nvfp4_policy as rules
from ple4patch.policy_file import places_ple
from ple4patch.sentinel import sentinel_line
from ple4patch.transform import patch_policy_source
from ple4patch.transform.policy import (
    DeclineCascade,
    InjectPolicyBlock,
    RefuseConflicts,
    SkipAutoDiskPlacement,
    policy_transforms,
)

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "tests/fixtures/standin_engine/vllm/platforms/runtime_defaults.py"
GOLDEN = REPO / "tests/fixtures/transform/policy.after.py"
sys.path.insert(0, str(REPO))
from tools import engine_corpus  # noqa: E402  (tests/data/engines/INDEX.md, or ../shared/engines)

REAL = engine_corpus.stored("main-51c0f972", "runtime_defaults.py")

CPU_LINE = (
    "ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but "
    "VLLM_PLE_CPU_OFFLOAD=1 is set (the CPU-offload process keeps the PLE table out of the GPU "
    "workers): set VLLM_PLE_CPU_OFFLOAD=0"
)


def standin() -> str:
    return STANDIN.read_text()


def _real_policies() -> list:
    rows = engine_corpus.corpus_files("runtime_defaults.py")
    return [pytest.param(row, id=row.label) for row in rows] or [
        pytest.param(None, marks=pytest.mark.skip(reason="no real policy file is present (tests/data/engines)"), id="none")]


REAL_POLICIES = _real_policies()  # 1CatAI/1Cat-vLLM 51c0f972, areslp/1Cat-vLLM 34e55548 and 48b2e9a6 (INDEX.md)


def real(row=None) -> str:
    if row is not None:
        return engine_corpus.check(row).decode("utf-8")
    if not REAL.is_file():
        pytest.skip(f"the real policy file is not stored ({REAL})")
    return REAL.read_text()


def test_golden():
    """The patched stand-in is the checked-in golden (regenerate: see the fixture's first line)."""
    assert patch_policy_source(standin()) == GOLDEN.read_text()


def test_sentinel_once_and_idempotence_refused():
    out = patch_policy_source(standin())
    assert out.count(sentinel_line()) == 1
    with pytest.raises(TransformError, match="already patched"):
        patch_policy_source(out)


def test_each_change_is_its_own_transformer():
    import libcst as cst

    assert policy_transforms(cst.parse_module(standin())) == (
        InjectPolicyBlock, RefuseConflicts, SkipAutoDiskPlacement, DeclineCascade)


@pytest.mark.parametrize("old,new,anchor", [
    ("    defaults = PolicyDefaults(self)\n", "    defaults = object()\n", "defaults = PolicyDefaults(self)"),
    ("def apply_runtime_policy_defaults(self):", "def apply_defaults(self):", "def apply_runtime_policy_defaults"),
    ("            _apply_sm70_qwen38_disk_ple_defaults(\n                self.parallel_config, defaults=defaults\n            )\n",
     "            pass\n", "_apply_sm70_qwen38_disk_ple_defaults"),
])
def test_missing_anchor_is_loud(old, new, anchor):
    text = standin()
    assert old in text
    with pytest.raises(TransformError) as err:
        patch_policy_source(text.replace(old, new))
    assert anchor in err.value.anchor


def test_a_file_without_placement_functions_is_refused_and_not_a_member():
    text = standin().replace("def _apply_sm70_qwen38_disk_ple_defaults(", "def _other_a(").replace(
        "def _qwen4exp_ple_cascade_requested(", "def _other_b(")
    assert not places_ple(text)
    with pytest.raises(TransformError, match="neither function"):
        patch_policy_source(text)
    assert places_ple(standin())


def test_injected_verbatim():
    body = (REPO / "ple4patch/kernels/nvfp4_policy.py").read_text().split('"""\n', 2)[2].strip()
    assert body in patch_policy_source(standin())


# -- what the patched policy decides ------------------------------------------------------------


def run_policy(text, monkeypatch, dtype, environ=None, **cfg_kw):
    mod = ph.load_policy(text, monkeypatch, environ)
    cfg = ph.make_cfg(dtype, **cfg_kw)
    defaults = mod.apply_runtime_policy_defaults(cfg)
    return cfg, defaults, mod


def test_stock_policy_places_the_table_on_disk(monkeypatch):
    """The behaviour the patch overrides, seen on the unpatched stand-in (so the tests can fail)."""
    cfg, defaults, mod = run_policy(standin(), monkeypatch, "nvfp4_rowpacked")
    assert defaults.set == {"VLLM_SM70_QWEN38_HYBRID_PLE": "0", "VLLM_PLE_CPU_OFFLOAD": "1",
                            "VLLM_PLE_DISK_OFFLOAD": "1"}
    fresh = ph.PolicyDefaults(cfg, {})
    assert mod._qwen4exp_ple_cascade_requested(cfg, defaults=fresh) is True


def test_nvfp4_request_wins_over_automatic_placement(monkeypatch):
    cfg, defaults, mod = run_policy(patch_policy_source(standin()), monkeypatch, "nvfp4_rowpacked")
    assert defaults.set == {} and defaults.finished
    assert cfg.parallel_config._ple_offload_ipc_path == ""
    fresh = ph.PolicyDefaults(cfg, {})
    assert mod._qwen4exp_ple_cascade_requested(cfg, defaults=fresh) is False
    assert cfg.kernel_config.ple_disk_cascade_active is False
    assert "nvfp4_rowpacked" in cfg.kernel_config.ple_disk_cascade_reason


@pytest.mark.parametrize("dtype", [None, "fp8_e4m3"])
def test_other_dtypes_keep_the_stock_placement(monkeypatch, dtype):
    cfg, defaults, mod = run_policy(patch_policy_source(standin()), monkeypatch, dtype)
    assert defaults.set["VLLM_PLE_DISK_OFFLOAD"] == "1"
    assert mod._qwen4exp_ple_cascade_requested(cfg, defaults=ph.PolicyDefaults(cfg, {})) is True


@pytest.mark.parametrize("environ,cfg_kw,line_start", [
    ({"VLLM_PLE_CPU_OFFLOAD": "1"}, {}, CPU_LINE),
    ({"VLLM_PLE_DISK_OFFLOAD": "true"}, {}, "ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but VLLM_PLE_DISK_OFFLOAD=true is set"),
    ({"VLLM_SM70_QWEN38_HYBRID_PLE": "1"}, {}, "ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but VLLM_SM70_QWEN38_HYBRID_PLE=1 is set"),
    ({}, {"load_format": "gguf"}, "ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but --load-format=gguf is set"),
    ({}, {"quantization": "gguf"}, "ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but --quantization=gguf is set"),
])
def test_explicit_conflicts_are_refused_in_one_line(monkeypatch, environ, cfg_kw, line_start):
    with pytest.raises(ValueError) as err:
        run_policy(patch_policy_source(standin()), monkeypatch, "nvfp4_rowpacked", environ, **cfg_kw)
    assert str(err.value).startswith(line_start) and "\n" not in str(err.value)


def test_every_conflict_is_named_in_the_one_line(monkeypatch):
    """Three variables of an old recipe: one failed start names all three changes, in the order
    of the rules, each after the first from its setting on."""
    environ = {"VLLM_SM70_QWEN38_HYBRID_PLE": "1", "VLLM_PLE_DISK_OFFLOAD": "1", "VLLM_PLE_CPU_OFFLOAD": "1"}
    with pytest.raises(ValueError) as err:
        run_policy(patch_policy_source(standin()), monkeypatch, "nvfp4_rowpacked", environ)
    line = str(err.value)
    assert "\n" not in line and line.startswith(CPU_LINE + "; and VLLM_PLE_DISK_OFFLOAD=1 is set (")
    changes = [f"set {name}=0" for name in ("VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE")]
    assert [line.index(c) for c in changes] == sorted(line.index(c) for c in changes)
    assert line.count("pins the PLE table in each GPU worker") == 1 and line.endswith(changes[-1])


def test_cascade_on_in_the_config_alone_is_declined_not_refused(monkeypatch):
    """KernelConfig.ple_disk_cascade is a plain ``bool = True`` in the engine (vllm/config/kernel.py,
    no record of who set it), so in the config an explicit true cannot be told from the default:
    the patched policy declines both and says why. (An explicit true on the vLLM command line is
    refused: tests/e2e/test_e2e_policy.py, tests/test_policy_command_line.py.)"""
    monkeypatch.setattr("sys.argv", ["/home/me/script.py"])  # not a vLLM command line
    text = patch_policy_source(standin())
    mod = ph.load_policy(text, monkeypatch)
    cfg = ph.make_cfg("nvfp4_rowpacked")
    assert cfg.kernel_config.ple_disk_cascade is True and not hasattr(cfg.kernel_config, "sources")
    mod.apply_runtime_policy_defaults(cfg)
    assert mod._qwen4exp_ple_cascade_requested(cfg, defaults=ph.PolicyDefaults(cfg, {})) is False
    assert cfg.kernel_config.ple_disk_cascade_reason.startswith("ple_embedding_dtype='nvfp4_rowpacked' pins")


GGUF_LINE = ("ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but --model={} is set "
             "(a GGUF checkpoint carries its own PLE table format): serve the NVFP4 safetensors checkpoint "
             "directory, not a GGUF model")


@pytest.mark.parametrize("kind", ["suffix", "magic", "remote"])
def test_gguf_model_with_load_format_auto_is_refused_naming_the_model(monkeypatch, tmp_path, kind):
    """`vllm serve model.gguf` (no --load-format): the engine's create_model_config turns
    load_format and quantization into "gguf" before the policy runs, and the line names the model."""
    if kind == "suffix":
        model = tmp_path / "Qwen3.8-Flash-Next-Q4_K_M.gguf"
        model.write_bytes(b"GGUF\x03\x00\x00\x00")
        model = str(model)
    elif kind == "magic":
        model = tmp_path / "weights.bin"
        model.write_bytes(b"GGUF\x03\x00\x00\x00")
        model = str(model)
    else:
        model = "someone/Qwen3.8-Flash-Next-GGUF:Q4_K_M"
    load_format, quantization = ph.engine_args_resolve(model)
    assert (load_format, quantization) == ("gguf", "gguf")
    mod = ph.load_policy(patch_policy_source(standin()), monkeypatch)
    cfg = ph.make_cfg("nvfp4_rowpacked", load_format=load_format, quantization=quantization, model=model)
    with pytest.raises(ValueError) as err:
        mod.apply_runtime_policy_defaults(cfg)
    assert str(err.value) == GGUF_LINE.format(model)


def test_load_format_gguf_with_a_safetensors_model_names_the_option(monkeypatch, tmp_path):
    load_format, quantization = ph.engine_args_resolve(str(tmp_path), load_format="gguf")
    assert load_format == "gguf" and quantization is None
    mod = ph.load_policy(patch_policy_source(standin()), monkeypatch)
    cfg = ph.make_cfg("nvfp4_rowpacked", load_format=load_format, model=str(tmp_path))
    with pytest.raises(ValueError, match=r"but --load-format=gguf is set .*drop --load-format gguf\)$"):
        mod.apply_runtime_policy_defaults(cfg)


@pytest.mark.parametrize("value", ["0", "false", ""])
def test_explicit_off_settings_are_fine(monkeypatch, value):
    cfg, defaults, _ = run_policy(patch_policy_source(standin()), monkeypatch, "nvfp4_rowpacked",
                                  {"VLLM_PLE_CPU_OFFLOAD": value, "VLLM_PLE_DISK_OFFLOAD": value})
    assert defaults.set == {}


def test_conflicts_without_nvfp4_are_the_engine_own(monkeypatch):
    cfg, defaults, _ = run_policy(patch_policy_source(standin()), monkeypatch, "fp8_e4m3",
                                  {"VLLM_PLE_CPU_OFFLOAD": "1"})
    assert defaults.set == {}  # explicit placement: the engine's rule, unchanged


# -- the rules as data (preflight's entry point) ------------------------------------------------


def test_rules_function_is_plain_and_ordered():
    lines = rules.ple4_policy_conflicts({"--quantization": "gguf", "VLLM_PLE_CPU_OFFLOAD": "1",
                                         "VLLM_PLE_DISK_OFFLOAD": "0"})
    assert lines[0] == CPU_LINE
    assert len(lines) == 2 and "--quantization=gguf" in lines[1]
    assert rules.ple4_policy_conflicts({"VLLM_PLE_CPU_OFFLOAD": "0", "--load-format": "safetensors"}) == []
    assert {r[0] for r in rules.PLE4_POLICY_RULES} == {
        "VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE",
        "VLLM_QWEN4EXP_PLE_DISK", "--kernel-config ple_disk_cascade", "--model", "--load-format", "--quantization"}


# -- the real file (1CatAI/1Cat-vLLM 51c0f972) ------------------------------------------------------


@pytest.mark.parametrize("row", REAL_POLICIES)
def test_real_policy_patches_with_all_four_changes(row):
    import libcst as cst

    text = real(row)
    assert len(policy_transforms(cst.parse_module(text))) == 4
    out = patch_policy_source(text)
    assert "if not ple4_policy_skips_auto_placement(self) and (" in out
    assert "    ple4_policy_check(self, defaults)\n" in out


@pytest.mark.parametrize("row", REAL_POLICIES)
def test_real_policy_declines_the_cascade_and_refuses(monkeypatch, row):
    text = patch_policy_source(real(row))
    mod = ph.load_policy(text, monkeypatch)
    cfg = ph.make_cfg("nvfp4_rowpacked")
    assert mod._qwen4exp_ple_cascade_requested(cfg, defaults=ph.PolicyDefaults(cfg, {})) is False
    fp8 = ph.make_cfg("fp8_e4m3")
    assert mod._qwen4exp_ple_cascade_requested(fp8, defaults=ph.PolicyDefaults(fp8, {})) is True
    mod = ph.load_policy(text, monkeypatch, {"VLLM_PLE_CPU_OFFLOAD": "1"})
    with pytest.raises(ValueError) as err:
        mod.apply_runtime_policy_defaults(ph.make_cfg("nvfp4_rowpacked"))
    assert str(err.value) == CPU_LINE


def test_readme_lists_every_refusal_line():
    """The README's serving section shows each refused setting with the exact start-up line."""
    readme = (REPO / "README.md").read_text()
    for name, conflicting, _why, _change in rules.PLE4_POLICY_RULES:
        value = True if conflicting[0] == "explicit-true" else conflicting[0]
        if conflicting[0] == "gguf-model":
            value = (value, "/models/Qwen3.8-Flash-Next-Q4_K_M.gguf")
        assert f"`{rules.ple4_policy_refusal(name, value)}`" in readme, name

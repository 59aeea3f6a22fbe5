"""The config patch of vllm/config/vllm.py: goldens, anchors, and what the patched module decides
(an NVFP4 request skips the engine's automatic PLE placement; any other keeps it).

The stand-in is tests/fixtures/config_era/vllm/config/vllm.py (shaped like ChainZeaxion/1Cat-vLLM
ebeb346a66d5d485d71fb2fc4079c8b891dd9250's, checked against it in tests/test_config_placement.py);
the real file's patch and its patched gate are tested there too.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import libcst as cst
import pytest

from ple4patch.errors import TransformError
from ple4patch.policy_file import AUTO_DISK_FUNCTION, HYBRID_FUNCTION, config_places_ple
from ple4patch.sentinel import sentinel_line, strip_injected
from ple4patch.transform import patch_config_source
from ple4patch.transform.config import InjectConfigBlock, RefuseConfigConflicts, SkipConfigDefaults, config_transforms
from ple4patch.transform.policy import DeclineCascade

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "tests/fixtures/config_era/vllm/config/vllm.py"
GOLDEN = REPO / "tests/fixtures/transform/config.after.py"
PLE_VARIABLES = ("VLLM_SM70_QWEN38_HYBRID_PLE", "VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD")
GUARD = "if not ple4_policy_skips_auto_placement(self) and ("


def standin() -> str:
    return STANDIN.read_text()


def test_golden():
    """The patched stand-in is the checked-in golden (regenerate it with patch_config_source on
    the stand-in after a deliberate change, and read the diff)."""
    assert patch_config_source(standin()) == GOLDEN.read_text()


def test_the_changes_and_nothing_else():
    """Outside the injected block the patch changes exactly the first statement of
    `__post_init__` (the check), the guarded `if` and the cascade's first statement."""
    out = strip_injected(patch_config_source(standin()))
    before = [line for line in standin().splitlines() if line.strip()]
    after = [line for line in out.splitlines() if line.strip()]
    added = [line for line in after if line not in before]
    removed = [line for line in before if line not in after]
    assert removed == ["        if self.sm70_qwen38_dual_compile_lane() and not any(", "        ):"]
    assert added == ["    if ple4_policy_declines_cascade(cfg):", "        return False",
                     "        ple4_policy_check(self)",
                     "        if not ple4_policy_skips_auto_placement(self) and (self.sm70_qwen38_dual_compile_lane() and not any(",
                     "        )):"]


def test_sentinel_once_and_idempotence_refused():
    out = patch_config_source(standin())
    assert out.count(sentinel_line()) == 1
    with pytest.raises(TransformError, match="already patched"):
        patch_config_source(out)
    with pytest.raises(TransformError, match="without a valid sentinel"):
        patch_config_source(out.replace(sentinel_line(), "# a line"))


def test_each_change_is_its_own_transformer():
    assert config_transforms(cst.parse_module(standin())) == (
        InjectConfigBlock, RefuseConfigConflicts, SkipConfigDefaults, DeclineCascade)
    no_cascade = standin().replace("def _qwen4exp_ple_cascade_requested(", "def _other(").replace(
        "_qwen4exp_ple_cascade_requested(self)", "_other(self)")
    assert config_transforms(cst.parse_module(no_cascade)) == (InjectConfigBlock, RefuseConfigConflicts, SkipConfigDefaults)
    out = patch_config_source(no_cascade)
    assert GUARD in out and "ple4_policy_declines_cascade(cfg)" not in strip_injected(out)


def test_the_block_goes_before_the_first_placement_function():
    out = patch_config_source(standin())
    assert out.index(sentinel_line()) < out.index(f"def {HYBRID_FUNCTION}(")
    assert out.index("import vllm.envs as envs") < out.index(sentinel_line())


def test_injected_verbatim():
    body = (REPO / "ple4patch/kernels/nvfp4_policy.py").read_text().split('"""\n', 2)[2].strip()
    assert body in patch_config_source(standin())


CALL = "            _apply_sm70_qwen38_hybrid_ple_defaults(self.parallel_config)\n"


@pytest.mark.parametrize("old,new,anchor", [
    ("class VllmConfig:", "class OtherConfig:", "class VllmConfig"),
    ("    def __post_init__(self):", "    def post_init(self):", "def __post_init__"),
    ("    def __post_init__(self):", "    def __post_init__(cfg):", "def __post_init__"),  # the check takes self
    (CALL, "            pass\n", f"if ...: {HYBRID_FUNCTION}(...)"),  # defined, never called there
    (CALL, CALL + "        if self.model_config is None:\n" + CALL.replace("    ", "  ", 1).replace("          ", "            "),
     f"if ...: {HYBRID_FUNCTION}(...)"),  # called from two `if`s
])
def test_missing_anchor_is_loud(old, new, anchor):
    text = standin()
    assert old in text
    with pytest.raises(TransformError) as err:
        patch_config_source(text.replace(old, new, 1))
    assert anchor in err.value.anchor, err.value


def test_a_module_without_a_default_function_is_refused_and_not_a_member():
    text = standin().replace(f"def {HYBRID_FUNCTION}(", "def _other(")
    assert not config_places_ple(text)
    with pytest.raises(TransformError, match="anchor 'default function': none of _apply_sm70_qwen38_hybrid_ple_defaults") as err:
        patch_config_source(text)
    assert " " not in err.value.anchor.replace("default function", "")  # a short anchor: prose wraps, a quoted list would not
    assert config_places_ple(standin()) and config_places_ple(patch_config_source(standin()))


def test_front_checks():
    with pytest.raises(TransformError, match="lone CR"):
        patch_config_source(standin().replace("\n", "\r", 3))
    with pytest.raises(TransformError, match="does not parse"):
        patch_config_source(standin() + "\ndef broken(:\n")
    crlf = standin().replace("\n", "\r\n")
    assert patch_config_source(crlf).count("\r\n") > crlf.count("\r\n")


def test_the_disk_default_form_is_guarded_too():
    """`_apply_sm70_qwen38_disk_ple_defaults(parallel_config)` (the form a 1Cat-vLLM test imports
    from vllm.config.vllm): guarded like the hybrid one, each exactly once, one `if` for both."""
    disk = standin().replace(HYBRID_FUNCTION, AUTO_DISK_FUNCTION)
    assert GUARD in patch_config_source(disk)
    both = standin() + (
        f"\n\ndef {AUTO_DISK_FUNCTION}(parallel_config):\n    os.environ['VLLM_PLE_CPU_OFFLOAD'] = '1'\n")
    with pytest.raises(TransformError) as err:  # defined, not called from __post_init__
        patch_config_source(both)
    assert AUTO_DISK_FUNCTION in err.value.anchor
    one_if = both.replace(CALL, CALL + CALL.replace(HYBRID_FUNCTION, AUTO_DISK_FUNCTION))
    out = patch_config_source(one_if)
    assert out.count("ple4_policy_skips_auto_placement(self) and") == 1


# -- what the patched module decides ------------------------------------------------------


def load(text: str, monkeypatch, environ: dict):
    """The module's text run as `vllm.config.vllm`, with `vllm.envs` reading `environ` (the
    engine's rule: set and one of 1/true/yes/on) and os.environ being `environ`."""
    envs = types.ModuleType("vllm.envs")
    envs.__getattr__ = lambda name: environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")
    vllm = types.ModuleType("vllm")
    vllm.envs = envs
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.envs", envs)
    monkeypatch.setattr(os, "environ", environ)
    mod = types.ModuleType("vllm.config.vllm")
    exec(compile(text, "vllm.py", "exec"), mod.__dict__)
    return mod


def start(mod, dtype: str):
    """`VllmConfig.__post_init__` on the SM70 Qwen3.8 dual-compile lane, the cascade off."""
    cfg = object.__new__(mod.VllmConfig)
    calls = []
    cfg.sm70_qwen38_dual_compile_lane = lambda: True
    cfg.parallel_config = SimpleNamespace(ensure_ple_offload_ipc_path=lambda: calls.append("ipc"))
    cfg.kernel_config = SimpleNamespace(ple_disk_cascade=False, ple_disk_cascade_active=None,
                                        ple_disk_cascade_reason=None)
    cfg.model_config = SimpleNamespace(hf_text_config=SimpleNamespace(ple_embedding_dtype=dtype))
    cfg.__post_init__()
    return cfg, calls


@pytest.mark.parametrize("patched", [False, True])
def test_an_nvfp4_request_skips_the_default_only_when_patched(monkeypatch, patched):
    text = patch_config_source(standin()) if patched else standin()
    environ: dict = {}
    _cfg, calls = start(load(text, monkeypatch, environ), "nvfp4_rowpacked")
    if patched:
        assert environ == {} and calls == []
    else:
        assert environ == dict.fromkeys(PLE_VARIABLES, "1") and calls == ["ipc"]


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", ""])
def test_other_dtypes_keep_the_default(monkeypatch, dtype):
    environ: dict = {}
    start(load(patch_config_source(standin()), monkeypatch, environ), dtype)
    assert environ == dict.fromkeys(PLE_VARIABLES, "1")
    environ = {"VLLM_PLE_CPU_OFFLOAD": "0"}  # the engine's own skip rule is unchanged
    start(load(patch_config_source(standin()), monkeypatch, environ), dtype)
    assert environ == {"VLLM_PLE_CPU_OFFLOAD": "0"}


def test_the_patched_cascade_declines_an_nvfp4_request(monkeypatch):
    environ: dict = {}
    mod = load(patch_config_source(standin()), monkeypatch, environ)
    kernel = SimpleNamespace(ple_disk_cascade=True, ple_disk_cascade_active=None, ple_disk_cascade_reason=None)
    cfg = SimpleNamespace(kernel_config=kernel,
                          model_config=SimpleNamespace(hf_text_config=SimpleNamespace(ple_embedding_dtype="nvfp4_rowpacked")))
    assert mod._qwen4exp_ple_cascade_requested(cfg) is False
    assert kernel.ple_disk_cascade_active is False and "nvfp4_rowpacked" in kernel.ple_disk_cascade_reason
    cfg.model_config.hf_text_config.ple_embedding_dtype = "float8_e4m3fn"
    kernel.ple_disk_cascade = False  # the stock path decides (here: off by KernelConfig)
    assert mod._qwen4exp_ple_cascade_requested(cfg) is False
    assert kernel.ple_disk_cascade_reason == "disabled by KernelConfig"


def test_the_check_goes_after_a_docstring():
    text = standin().replace("    def __post_init__(self):\n", "    def __post_init__(self):\n        \"\"\"Verify.\"\"\"\n", 1)
    out = patch_config_source(text)
    assert '        """Verify."""\n        ple4_policy_check(self)\n' in out


@pytest.mark.parametrize("dtype,refused", [("nvfp4_rowpacked", True), ("float8_e4m3fn", False)])
@pytest.mark.parametrize("variable", ["VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE"])
def test_an_explicit_conflict_is_refused_in_post_init(monkeypatch, dtype, refused, variable):
    """The process that builds the config refuses an explicit conflicting variable for an NVFP4
    request, in one line naming it and what to set, before the engine's own defaults run (so the
    environment is left as the user set it); any other request starts as stock."""
    environ = {variable: "1"}
    mod = load(patch_config_source(standin()), monkeypatch, environ)
    if refused:
        with pytest.raises(ValueError) as err:
            start(mod, dtype)
        line = str(err.value)
        assert "\n" not in line and f"{variable}=1 is set" in line and line.endswith(f"set {variable}=0")
    else:
        start(mod, dtype)
    assert environ == {variable: "1"}
    start(load(standin(), monkeypatch, {variable: "1"}), dtype)  # the stock module refuses nothing


@pytest.mark.parametrize("program", ["/venv/bin/vllm", "/venv/lib/python3.12/site-packages/vllm/entrypoints/cli/main.py"])
def test_an_explicit_cascade_on_the_command_line_is_refused_in_the_front_end(monkeypatch, program):
    """`vllm serve --kernel-config '{"ple_disk_cascade": true}'`: the front end, which builds the
    config from its own command line, refuses it (a Ray worker does not inherit that command line,
    so the worker-side check in the layer could not see it)."""
    monkeypatch.setattr(sys, "argv", [program, "serve", "/models/q", "--kernel-config", '{"ple_disk_cascade": true}'])
    mod = load(patch_config_source(standin()), monkeypatch, {})
    with pytest.raises(ValueError, match="ple_disk_cascade=true is set"):
        start(mod, "nvfp4_rowpacked")
    start(load(patch_config_source(standin()), monkeypatch, {}), "float8_e4m3fn")
    monkeypatch.setattr(sys, "argv", [program, "serve", "/models/q", "--kernel-config", '{"ple_disk_cascade": false}'])
    start(load(patch_config_source(standin()), monkeypatch, {}), "nvfp4_rowpacked")

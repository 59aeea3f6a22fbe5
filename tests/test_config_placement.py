"""The era before the start-up policy file: the release places the PLE table from
``vllm/config/vllm.py``, which ple4patch patches as a member of the set.

Four layers of checks:

- the detector (`policy_file.config_placement`, `config_cascade_form`) on small texts;
- the real file, ChainZeaxion/1Cat-vLLM ebeb346a66d5d485d71fb2fc4079c8b891dd9250
  ``vllm/config/vllm.py`` (tests/data/engines/fork-chainzeaxion-ebeb346a/vllm.py, not committed;
  skipped when absent): the detector on it, and the engine's own code for what the advice relies
  on, taken from the file and run with stand-ins for what it imports: the gate of
  ``_apply_sm70_qwen38_hybrid_ple_defaults`` in ``VllmConfig.__post_init__`` (lines 2127-2149) is
  skipped by ``VLLM_PLE_CPU_OFFLOAD=0``; the function writes the three variables (303-312); the
  cascade (322-390), with the same commit's ``_get_ple_embedding_quant_method`` (ple_layer.py
  lines 505-544), declines an NVFP4 table by its storage check and admits FP8; and the stand-in
  of tests/fixtures/config_era has the same names, skip rule and writes;
- the real file patched (`transform.patch_config_source`): its gate and its cascade, taken from
  the patched text and run the same way, skip the default and decline the cascade for an NVFP4
  request and keep both for FP8;
- status, apply (dry run, --allow-unknown), verify and revert (text and --json) on the stand-in
  engine as a real wheel (the PLE layer and that stand-in ``vllm/config/vllm.py``): a set of
  two files, no placement note; unpinned, apply refuses saying why; a ``vllm/config/vllm.py``
  that is not a member (a cascade alone, unreadable) keeps its one note.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
import types
from types import SimpleNamespace

import pytest

import kit
from ple4patch import commands, policy_file
from ple4patch import manifest as m
from ple4patch.columns import CONTINUATION, WIDTH
from ple4patch.engine import find_engine
from ple4patch.fileset import assess_set
from ple4patch.paths import CONFIG_REL
from ple4patch.policy_file import AUTO_DISK_FUNCTION, CASCADE_FUNCTION, CONFIG_DEFAULTS, CONFIG_SKIPPED_BY, HYBRID_FUNCTION
from ple4patch.sentinel import sentinel_line, strip_injected
from ple4patch.transform import patch_config_source
from ple4patch.transform.policy import BLOCK_BEGIN, BLOCK_END
from tools import engine_corpus

LABEL = "fork-chainzeaxion-ebeb346a"
STORAGE_REFUSED = "checkpoint metadata does not provide raw E4M3 PLE storage"


# -- the detector ----------------------------------------------------------------------

def test_detector_finds_module_level_definitions_only():
    text = (
        "import os\n\n"
        "class VllmConfig:\n"
        "    def _apply_sm70_qwen38_hybrid_ple_defaults(self):\n        pass\n\n"
        "# def _apply_sm70_qwen38_disk_ple_defaults(parallel_config): a comment\n"
        "x = _qwen4exp_ple_cascade_requested(cfg)\n"
    )
    assert policy_file.config_placement(text) == ()
    assert policy_file.config_cascade_form(text) is None
    text += "\ndef _apply_sm70_qwen38_disk_ple_defaults(\n    parallel_config,\n) -> None:\n    pass\n"
    assert policy_file.config_placement(text) == ("_apply_sm70_qwen38_disk_ple_defaults",)
    text += "\ndef _apply_sm70_qwen38_hybrid_ple_defaults(parallel_config):\n    pass\n"
    assert policy_file.config_placement(text) == (HYBRID_FUNCTION, "_apply_sm70_qwen38_disk_ple_defaults")


def test_detector_does_not_count_a_definition_inside_a_string():
    # A docstring or an embedded snippet that shows the function at column 0 is not the function.
    shown = '_DOC = """\nExample:\ndef _apply_sm70_qwen38_hybrid_ple_defaults(parallel_config):\n"""\n'
    assert policy_file.config_placement(shown) == ()
    defined = shown + "\ndef _apply_sm70_qwen38_hybrid_ple_defaults(parallel_config):\n    pass\n"
    assert policy_file.config_placement(defined) == (HYBRID_FUNCTION,)
    # The policy file's entry point likewise.
    entry = "def _qwen4exp_ple_cascade_requested(cfg):\n    pass\n"
    assert not policy_file.places_ple(entry + "s = '''\ndef apply_runtime_policy_defaults(cfg):\n'''\n")
    assert policy_file.places_ple(entry + "def apply_runtime_policy_defaults(cfg):\n    pass\n")


def test_detector_reads_lines_when_the_text_does_not_tokenize():
    # An unterminated string: the detector still answers (from the lines), never raises.
    text = 'def _apply_sm70_qwen38_hybrid_ple_defaults(parallel_config):\n    x = """never closed\n'
    assert policy_file.config_placement(text) == (HYBRID_FUNCTION,)


@pytest.mark.parametrize("body, form", [
    ("    if not envs.VLLM_QWEN4EXP_PLE_DISK:\n        return False\n    return True\n", "switch"),
    ("    from x import _get_ple_embedding_quant_method\n    return _get_ple_embedding_quant_method(c)\n",
     "storage"),
    ("    return cfg.kernel_config.ple_disk_cascade\n", "unknown"),
])
def test_cascade_form_is_read_from_the_function_itself(body, form):
    after = "\n\ndef later():\n    return envs.VLLM_QWEN4EXP_PLE_DISK, _get_ple_embedding_quant_method\n"
    text = f"def {CASCADE_FUNCTION}(cfg):\n{body}{after}"
    assert policy_file.config_cascade_form(text) == form


# -- the real file and what the advice relies on ----------------------------------------

def _row(name: str, label: str = LABEL):
    rows = [r for r in engine_corpus.indexed(name) if r.label == label]
    assert len(rows) == 1, f"tests/data/engines/INDEX.md has no single {label} {name} row"
    return rows[0]


def _real(name: str, label: str = LABEL) -> str:
    row = _row(name, label)
    if not row.present:
        pytest.skip(f"{row.path} is absent (real engine files are not committed)")
    return engine_corpus.check(row).decode("utf-8")


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return fn


def _run_def(fn: ast.FunctionDef, namespace: dict):
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "<engine>", "exec"), namespace)
    return namespace[fn.name]


def _default_gate(tree: ast.Module, default: str = HYBRID_FUNCTION) -> ast.expr:
    """The `not any(name in os.environ for name in (...))` of the `if` that calls the default."""
    (gate,) = [
        n.test for n in ast.walk(tree)
        if isinstance(n, ast.If) and any(  # the call stands in the if's own body, not a nested one
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and getattr(s.value.func, "id", None) == default for s in n.body)
    ]
    (skip,) = [n for n in ast.walk(gate) if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
               and isinstance(n.operand, ast.Call) and getattr(n.operand.func, "id", None) == "any"]
    return skip


def _default_if_test(tree: ast.Module, default: str = HYBRID_FUNCTION) -> ast.expr:
    """The whole test of the `if` whose own body calls the default."""
    (test,) = [
        n.test for n in ast.walk(tree)
        if isinstance(n, ast.If) and any(
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and getattr(s.value.func, "id", None) == default for s in n.body)
    ]
    return test


def _gate_names(skip: ast.expr) -> tuple[str, ...]:
    (gen,) = skip.operand.args
    return tuple(ast.literal_eval(gen.generators[0].iter))


def _gate_applies(skip: ast.expr, environ: dict) -> bool:
    return eval(compile(ast.Expression(skip), "<gate>", "eval"), {"os": SimpleNamespace(environ=environ)})


def test_the_real_file_is_indexed_and_detected():
    row = _row("vllm.py")
    assert (row.repository, row.commit, row.pin) == ("ChainZeaxion/1Cat-vLLM",
                                                    "ebeb346a66d5d485d71fb2fc4079c8b891dd9250", "no")
    text = _real("vllm.py")
    assert policy_file.config_placement(text) == (HYBRID_FUNCTION, CASCADE_FUNCTION)
    assert policy_file.config_cascade_form(text) == "storage"


def test_the_real_default_is_skipped_by_the_advice():
    tree = ast.parse(_real("vllm.py"))
    skip = _default_gate(tree)
    assert _gate_names(skip) == CONFIG_SKIPPED_BY
    assert _gate_applies(skip, {}) is True
    for name in CONFIG_SKIPPED_BY:  # set at all, whatever the value, skips it
        assert _gate_applies(skip, {name: "0"}) is False and _gate_applies(skip, {name: ""}) is False
    assert _gate_applies(skip, {"VLLM_QWEN4EXP_PLE_HOST_GIB": "4"}) is True

    environ, calls = {}, []
    hybrid = _run_def(_function(tree, HYBRID_FUNCTION),
                      {"os": SimpleNamespace(environ=environ), "ParallelConfig": object})
    hybrid(SimpleNamespace(ensure_ple_offload_ipc_path=lambda: calls.append(1)))
    assert environ == dict(CONFIG_DEFAULTS[HYBRID_FUNCTION]) and calls == [1]


class _Envs:
    """`vllm.envs` for the PLE switches: set and one of 1/true/yes/on (tests/e2e/standin_vllm's
    envs.py, after 1CatAI/1Cat-vLLM ae13773a's vllm/envs.py)."""

    def __init__(self, environ: dict) -> None:
        self._environ = environ

    def __getattr__(self, name: str) -> bool:
        return self._environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")


class _MixedPrecision:  # ModelOpt's mixed-precision config, as NVIDIA's NVFP4 checkpoint has it
    def __init__(self, algo: str) -> None:
        self.algo = algo

    def is_layer_excluded(self, prefix: str) -> bool:
        return False

    def _resolve_quant_algo(self, prefix: str) -> str:
        return self.algo


@pytest.fixture
def real_cascade(monkeypatch):
    """The real cascade admission, with the same commit's real `_get_ple_embedding_quant_method`."""
    layer_tree = ast.parse(_real("ple_layer.py"))
    text = _real("vllm.py")
    trees = {False: (ast.parse(text), {}), True: (ast.parse(patch_config_source(text)), _injected(patch_config_source(text)))}

    class Fp8Method:
        pass

    modelopt = types.ModuleType("vllm.model_executor.layers.quantization.modelopt")
    modelopt.ModelOptMixedPrecisionConfig = _MixedPrecision
    quant_method = _run_def(_function(layer_tree, "_get_ple_embedding_quant_method"), {
        "QuantizationConfig": object, "QuantizeMethodBase": object, "Qwen4ExpPLEFp8EmbeddingMethod": Fp8Method,
        "Fp8Config": type("Fp8Config", (), {}), "is_layer_skipped": lambda *a: False,
    })
    layer_mod = types.ModuleType("vllm.models.qwen4_exp.nvidia.ple_layer")
    layer_mod._get_ple_embedding_quant_method = quant_method
    common = types.ModuleType("vllm.models.qwen4_exp.common.ple")
    common.check_ple_layers_on_first_pp_rank = lambda text, pp: None
    for name in ("vllm", "vllm.models", "vllm.models.qwen4_exp", "vllm.models.qwen4_exp.nvidia",
                 "vllm.models.qwen4_exp.common", "vllm.model_executor", "vllm.model_executor.layers",
                 "vllm.model_executor.layers.quantization"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    for mod in (modelopt, layer_mod, common):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)

    def admit(environ: dict, storage: str, quant_config=None, patched: bool = False) -> tuple[bool, str | None]:
        tree, injected = trees[patched]
        fn = _run_def(_function(tree, CASCADE_FUNCTION), {
            **injected, "envs": _Envs(environ), "torch": SimpleNamespace(float16="float16"),
            "_ple_disk_cascade_cuda_supported": lambda: True,
        })
        kernel = SimpleNamespace(ple_disk_cascade=True, ple_disk_cascade_active=None, ple_disk_cascade_reason=None)
        parallel = SimpleNamespace(prefill_context_parallel_size=1, decode_context_parallel_size=1, nnodes=1,
                                   data_parallel_backend="mp", data_parallel_size_local=1, data_parallel_size=1,
                                   use_ubatching=False, pipeline_parallel_size=1)
        text = SimpleNamespace(ple_layer_ids=[2], ple_embedding_dtype=storage)
        cfg = SimpleNamespace(kernel_config=kernel, parallel_config=parallel, weight_transfer_config=None,
                              model_config=SimpleNamespace(hf_text_config=text, dtype="float16"),
                              load_config=SimpleNamespace(load_format="auto"), quant_config=quant_config)
        return fn(cfg), kernel.ple_disk_cascade_reason

    return admit


def test_the_real_cascade_declines_an_nvfp4_table_by_its_storage(real_cascade):
    advice = {"VLLM_PLE_CPU_OFFLOAD": "0"}
    assert real_cascade(advice, "nvfp4_rowpacked") == (False, STORAGE_REFUSED)
    assert real_cascade(advice, "nvfp4_rowpacked", _MixedPrecision("NVFP4")) == (False, STORAGE_REFUSED)
    # the storage check decides, not the advice: FP8 storage is admitted with it
    assert real_cascade(advice, "float8_e4m3fn") == (True, None)
    assert real_cascade(advice, "", _MixedPrecision("FP8")) == (True, None)
    assert real_cascade({"VLLM_PLE_CPU_OFFLOAD": "1"}, "float8_e4m3fn") == (
        False, "existing explicit PLE placement takes precedence")


def _injected(patched: str) -> dict:
    """The namespace of the block the patch injected, run from the patched text itself."""
    begin, end = patched.index(BLOCK_BEGIN), patched.index(BLOCK_END)
    namespace: dict = {}
    exec(compile(patched[begin:end], "<injected>", "exec"), namespace)
    return namespace


def test_the_real_file_patches():
    text = _real("vllm.py")
    out = patch_config_source(text)
    assert out.count(sentinel_line()) == 1
    assert out.count("if not ple4_policy_skips_auto_placement(self) and (") == 1
    assert out.count("    if ple4_policy_declines_cascade(cfg):\n        return False\n") == 1
    assert out.count("ple4_policy_check(self)") == 1
    post_init = next(n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.ClassDef) and n.name == "VllmConfig").body
    post_init = next(n for n in post_init if isinstance(n, ast.FunctionDef) and n.name == "__post_init__")
    first = post_init.body[1]  # after the docstring: the check, before any of the engine's own statements
    assert isinstance(post_init.body[0].value, ast.Constant) and ast.unparse(first) == "ple4_policy_check(self)"
    assert policy_file.config_places_ple(out) and policy_file.config_placement(out) == (HYBRID_FUNCTION, CASCADE_FUNCTION)
    # everything else is the engine's own text
    assert strip_injected(out).replace("not ple4_policy_skips_auto_placement(self) and (", "(").replace(
        "    if ple4_policy_declines_cascade(cfg):\n        return False\n", "").replace(
        "        ple4_policy_check(self)\n", "").replace("\n\n\n\n\n", "\n\n") == text


def _patched_gate(environ: dict, dtype: str, label: str = LABEL, default: str = HYBRID_FUNCTION) -> bool:
    """Whether the patched real `VllmConfig.__post_init__` calls the default: the test of
    its `if`, from the patched text, on the SM70 Qwen3.8 dual-compile lane at pipeline parallel 1
    (every other condition of that `if` true), with the injected rules from the patched text."""
    patched = patch_config_source(_real("vllm.py", label))
    test = _default_if_test(ast.parse(patched), default)
    cfg = SimpleNamespace(
        model_config=SimpleNamespace(hf_text_config=SimpleNamespace(ple_embedding_dtype=dtype)),
        speculative_config=None,
        parallel_config=SimpleNamespace(pipeline_parallel_size=1, data_parallel_backend="mp",
                                        data_parallel_size_local=1, data_parallel_size=1))
    namespace = {**_injected(patched), "os": SimpleNamespace(environ=environ), "self": cfg,
                 "envs": _Envs({**environ, "VLLM_SM70_QWEN38_DUAL_COMPILE": "1"}),
                 "_is_sm70_qwen38_decode_compile_contract": lambda *a: True}
    return eval(compile(ast.Expression(test), "<gate>", "eval"), namespace)


def test_the_patched_real_gate_skips_the_default_for_an_nvfp4_request():
    assert _patched_gate({}, "nvfp4_rowpacked") is False  # no variable needed
    assert _patched_gate({}, "float8_e4m3fn") is True  # FP8: the engine's default, as before
    assert _patched_gate({}, "") is True
    assert _patched_gate({"VLLM_PLE_CPU_OFFLOAD": "0"}, "float8_e4m3fn") is False  # its own skip rule kept


# 1CatAI/1Cat-vLLM main 72d8b4d711dcd4ec66e4520bdd9d2194f193a547's vllm/config/vllm.py: the
# disk default (not the hybrid one) at line 303, called at 2166 from the `if` at 2144; the cascade
# admission at 322.
MAIN = "main-72d8b4d"


def test_the_main_file_is_detected_and_pinned():
    row = _row("vllm.py", MAIN)
    assert (row.repository, row.pin) == ("1CatAI/1Cat-vLLM", "main")
    text = _real("vllm.py", MAIN)
    assert policy_file.config_placement(text) == (AUTO_DISK_FUNCTION, CASCADE_FUNCTION)
    assert row.sha256 in m.load_file(m.SHIPPED_MANIFESTS_DIR / "vllm_config.json").pins


def test_the_main_file_patches_and_its_gate_skips_the_disk_default_for_nvfp4():
    text = _real("vllm.py", MAIN)
    out = patch_config_source(text)
    assert out.count("ple4_policy_check(self)") == 1
    assert out.count("if not ple4_policy_skips_auto_placement(self) and (") == 1
    assert out.count("    if ple4_policy_declines_cascade(cfg):\n        return False\n") == 1
    assert strip_injected(out).replace("not ple4_policy_skips_auto_placement(self) and (", "(").replace(
        "    if ple4_policy_declines_cascade(cfg):\n        return False\n", "").replace(
        "        ple4_policy_check(self)\n", "").replace("\n\n\n\n\n", "\n\n") == text
    tree = ast.parse(text)
    assert _gate_names(_default_gate(tree, AUTO_DISK_FUNCTION)) == CONFIG_SKIPPED_BY
    environ, calls = {}, []
    _run_def(_function(tree, AUTO_DISK_FUNCTION), {"os": SimpleNamespace(environ=environ), "ParallelConfig": object})(
        SimpleNamespace(ensure_ple_offload_ipc_path=lambda: calls.append(1)))
    assert environ == dict(CONFIG_DEFAULTS[AUTO_DISK_FUNCTION]) and calls == [1]
    gate = functools.partial(_patched_gate, label=MAIN, default=AUTO_DISK_FUNCTION)
    assert gate({}, "nvfp4_rowpacked") is False and gate({}, "float8_e4m3fn") is True
    assert gate({"VLLM_PLE_DISK_OFFLOAD": "0"}, "float8_e4m3fn") is False


def test_the_patched_real_cascade_declines_nvfp4_and_admits_fp8(real_cascade):
    admitted, reason = real_cascade({}, "nvfp4_rowpacked", patched=True)
    assert admitted is False and reason == "ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker"
    assert real_cascade({}, "float8_e4m3fn", patched=True) == (True, None)
    assert real_cascade({}, "", _MixedPrecision("FP8"), patched=True) == (True, None)


def test_the_stand_in_matches_the_real_file():
    real, standin = _real("vllm.py"), kit.config_era_bytes().decode("utf-8")
    assert policy_file.config_placement(standin) == policy_file.config_placement(real)
    assert policy_file.config_cascade_form(standin) == policy_file.config_cascade_form(real)
    writes = []
    for text in (real, standin):
        tree = ast.parse(text)
        assert _gate_names(_default_gate(tree)) == CONFIG_SKIPPED_BY
        environ = {}
        _run_def(_function(tree, HYBRID_FUNCTION), {"os": SimpleNamespace(environ=environ), "ParallelConfig": object})(
            SimpleNamespace(ensure_ple_offload_ipc_path=lambda: None))
        writes.append(environ)
        args = [a.arg for a in _function(tree, CASCADE_FUNCTION).args.args]
        assert args == ["cfg"], args
    assert writes[0] == writes[1]




# -- the set on the engine -------------------------------------------------------------------

LAYER_REL = "vllm/models/qwen4_exp/nvidia/ple_layer.py"


@pytest.fixture(scope="module")
def pins(tmp_path_factory):
    path, _pin = kit.standin_manifest(tmp_path_factory.getbasetemp())
    return path


@pytest.fixture(scope="module")
def config_pins(tmp_path_factory):
    return kit.standin_config_set_manifests(tmp_path_factory.getbasetemp())


@pytest.fixture
def config_venv(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine_config_era(kit.standin_bytes(), kit.config_era_bytes()))


def _wide(text: str) -> list[str]:
    """Lines over the text width (a path alone on its line may be longer)."""
    return [line for line in text.splitlines()
            if len(line) > WIDTH and " " in line.strip().removesuffix(CONTINUATION)]


def test_the_config_pins_are_the_main_files_and_the_test_manifest_pins_the_stand_in():
    """The shipped pins of vllm/config/vllm.py are those of INDEX.md's plausible installs
    (1CatAI main 72d8b4d), to what the transform makes of them where the file is here; a fork's
    file (ChainZeaxion ebeb346a) is test data only. The checked-in test manifest pins the
    stand-in (`make pin`)."""
    shipped = m.load_file(m.SHIPPED_MANIFESTS_DIR / "vllm_config.json")
    assert json.loads((m.SHIPPED_MANIFESTS_DIR / "vllm_config.json").read_text())["target"] == CONFIG_REL
    rows = engine_corpus.indexed("vllm.py")
    assert {r.sha256 for r in rows if r.plausible_install} == set(shipped.pins) != set()
    assert not any(r.sha256 in shipped.pins for r in rows if not r.plausible_install)
    for row in rows:
        if row.sha256 in shipped.pins and row.present:
            pin = shipped.pins[row.sha256]
            assert pin.target == CONFIG_REL and pin.label.startswith(f"1Cat-vLLM main {row.commit[:8]}")
            assert pin.patched_sha256 == kit.sha256_hex(patch_config_source(engine_corpus.check(row).decode()).encode())
    (pin,) = m.load_file(kit.REPO / "tests/fixtures/standin_config_manifest.json").pins.values()
    assert pin.target == CONFIG_REL and pin.pristine_sha256 == kit.sha256_hex(kit.config_era_bytes())
    assert pin.patched_sha256 == kit.sha256_hex(patch_config_source(kit.config_era_bytes().decode()).encode())


def test_the_config_module_is_a_member_of_the_set(config_venv, config_pins):
    man = m.load(config_pins[0], use_env=False)
    s = assess_set(find_engine(config_venv), man)
    assert s.rels == [LAYER_REL, CONFIG_REL] and s.state == "pristine"
    assert s.config is not None and s.config.member and s.placement_notes == [] and s.notes == []


def test_cli_cycle_of_the_config_set(config_venv, config_pins):
    """status, dry run, apply, apply again, status, verify, revert through the real CLI (text and
    --json): both files patched and restored, no placement note, every line within the width."""
    mans, set_pins = config_pins
    env = kit.env_with(mans)
    site = kit.site_packages(config_venv)
    before = kit.site_snapshot(config_venv, pycache=False)
    for args, exit_code in ((("status",), 0), (("apply", "--dry-run", "--stat"), 0), (("apply",), 0), (("apply",), 0),
                            (("status",), 0), (("verify",), 0), (("revert",), 0), (("verify",), 8)):
        proc = kit.run_real(*args, config_venv, env=env)
        assert proc.returncode == exit_code, (args, proc.stdout, proc.stderr)
        assert _wide(proc.stdout) == [], proc.stdout
        assert "VLLM_PLE_CPU_OFFLOAD" not in proc.stdout and "PLE table" not in proc.stdout, (args, proc.stdout)
        d = kit.json_of(kit.run_real(*args, "--json", config_venv, env=env))
        assert d["exit_code"] == exit_code and (exit_code or d["set"]["files"] == [LAYER_REL, CONFIG_REL]), (args, d)
        assert not any("VLLM_PLE_CPU_OFFLOAD" in n or "PLE table" in n for n in d.get("notes", [])), (args, d)
        if args[1:2] == ("--dry-run",):
            assert f"+++ b/{CONFIG_REL}" in d["diff"] and "ple4_policy_skips_auto_placement(self) and (" in d["diff"]
        if args == ("apply",) and d["changed"]:
            assert kit.sha(site / CONFIG_REL) == set_pins[CONFIG_REL].patched_sha256
            assert kit.backup_sha(site / CONFIG_REL) == set_pins[CONFIG_REL].pristine_sha256
            kit.run_real("revert", config_venv, env=env)  # the --json apply patched it: undo, then the text one
            assert kit.run_real(*args, config_venv, env=env).returncode == 0
    assert kit.site_snapshot(config_venv, pycache=False) == before


def test_unpinned_config_module_needs_allow_unknown(config_venv, pins):
    """As shipped, ple4patch has no pin of this vllm/config/vllm.py (a fork's): apply refuses saying
    why and writes nothing; `apply --allow-unknown` patches it, and `vllm serve` then needs no variable."""
    env = kit.env_with([pins])
    site = kit.site_packages(config_venv)
    unchanged = kit.tree_hash(config_venv)
    proc = kit.run_real("status", config_venv, env=env)  # the set's next step is the opt-in
    nexts = [line for line in kit.logical_lines(proc.stdout) if line.startswith("next:")]
    assert nexts == [f"next:    review with `ple4patch apply --dry-run {config_venv}`, then "
                     f"`ple4patch apply --allow-unknown {config_venv}`"], proc.stdout
    proc = kit.run_real("apply", config_venv, env=env)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert f"places the PLE table by itself from {CONFIG_REL}" in err and "ships no pin for these bytes" in err, err
    assert "apply --allow-unknown" in err and _wide(proc.stderr) == []
    assert kit.tree_hash(config_venv) == unchanged
    proc = kit.run_real("apply", "--dry-run", config_venv, env=env)
    assert proc.returncode == 0 and "NOT pinned" in proc.stdout and CONFIG_REL in proc.stdout, proc.stdout
    proc = kit.run_real("apply", "--allow-unknown", config_venv, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ple4_policy_skips_auto_placement(self) and (" in (site / CONFIG_REL).read_text()
    assert (site / ".ple4patch-pins.config_vllm.json").is_file()
    for args in (("status",), ("verify",)):
        proc = kit.run_real(*args, config_venv, env=env)
        assert proc.returncode == 0 and "VLLM_PLE_CPU_OFFLOAD" not in proc.stdout, (args, proc.stdout)
    assert kit.run_real("revert", config_venv, env=env).returncode == 0
    assert kit.sha(site / CONFIG_REL) == kit.sha256_hex(kit.config_era_bytes())


def test_a_release_with_both_placement_files_is_a_three_file_set(wheelhouse, engine_venv, tmp_path, config_pins):
    """The policy file and a VllmConfig module that both place the table: a set of three."""
    from ple4patch.paths import POLICY_REL

    policy_mans, policy_pins = kit.standin_set_manifests(tmp_path)
    mans = [*config_pins[0], policy_mans[1]]
    wheel = wheelhouse.wheel({LAYER_REL: kit.standin_bytes(), POLICY_REL: kit.standin_policy_bytes(),
                              CONFIG_REL: kit.config_era_bytes()}, version="1.5.2")
    venv = engine_venv(wheel)
    env = kit.env_with(mans)
    d = kit.json_of(kit.run_real("apply", "--json", venv, env=env))
    assert d["exit_code"] == 0 and d["set"]["files"] == [LAYER_REL, POLICY_REL, CONFIG_REL]
    assert [f["changed"] for f in d["files"]] == [True, True, True]
    assert kit.run_real("verify", venv, env=env).returncode == 0
    d = kit.json_of(kit.run_real("revert", "--json", venv, env=env))
    assert d["exit_code"] == 0 and [f["restored"] for f in d["files"]] == [True, True, True]
    site = kit.site_packages(venv)
    assert kit.sha(site / POLICY_REL) == policy_pins[POLICY_REL].pristine_sha256


def test_a_cascade_alone_is_no_member_and_keeps_its_note(wheelhouse, engine_venv, pins):
    """A vllm/config/vllm.py with the cascade but no default (Peuqui/1Cat-vLLM 0f580579's form:
    only when VLLM_QWEN4EXP_PLE_DISK asks): not patched, one note saying what it does."""
    text = kit.config_era_bytes().replace(f"def {HYBRID_FUNCTION}(".encode(), b"def _other(").replace(
        f"    {HYBRID_FUNCTION}(".encode(), b"    _other(").replace(
        b"    if not kernel.ple_disk_cascade:", b"    if not envs.VLLM_QWEN4EXP_PLE_DISK:")
    assert not policy_file.config_places_ple(text.decode()) and policy_file.config_cascade_form(text.decode()) == "switch"
    venv = engine_venv(wheelhouse.engine_config_era(kit.standin_bytes(), text))
    env = kit.env_with([pins])
    for args in (("status",), ("apply",)):
        proc = kit.run_real(*args, venv, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (line,) = _note_lines(proc.stdout)
        assert "admits the PLE disk cascade by itself" in line and "VLLM_QWEN4EXP_PLE_DISK=1" in line, line
        d = kit.json_of(kit.run_real(*args, "--json", venv, env=env))
        assert d["set"]["files"] == [LAYER_REL]
    assert kit.sha(kit.site_packages(venv) / CONFIG_REL) == kit.sha256_hex(text)


def _note_lines(text: str) -> list[str]:
    return [line for line in kit.logical_lines(text) if CONFIG_REL in line and "note:" in line]


def test_no_note_without_the_placement(wheelhouse, engine_venv, pins, tmp_path):
    """A runtime_defaults-era engine (its placement is in the set), an engine without
    vllm/config/vllm.py, and one whose vllm/config/vllm.py places nothing: no note, no member."""
    set_pins, _ = kit.standin_set_manifests(tmp_path)
    plain = b"import os\n\n\nclass VllmConfig:\n    def __post_init__(self):\n        pass\n"
    cases = [
        (wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes()), set_pins),
        (wheelhouse.engine(kit.standin_bytes()), [pins]),
        (wheelhouse.engine_config_era(kit.standin_bytes(), plain), [pins]),
    ]
    for i, (wheel, mans) in enumerate(cases):
        venv = engine_venv(wheel, name=f"venv{i}")
        for args in (("status",), ("apply",)):
            proc = kit.run_real(*args, venv, env=kit.env_with(mans))
            assert proc.returncode == 0 and CONFIG_REL not in proc.stdout, (i, args, proc.stdout)
            s = assess_set(find_engine(venv), m.load(mans, use_env=False))
            assert s.config is None and CONFIG_REL not in s.rels


def test_an_unreadable_config_module_is_said_so(config_venv, pins):
    """Something other than a readable regular file at vllm/config/vllm.py: not read (never a
    FIFO or a device), not a member, status still works and exits 0, and its note says the
    placement is unknown and what makes the start safe either way."""
    path = kit.site_packages(config_venv) / CONFIG_REL
    path.unlink()
    path.mkdir()
    proc = kit.run_real("status", config_venv, env=kit.env_with([pins]))
    assert proc.returncode == 0 and f"{CONFIG_REL} cannot be read" in proc.stdout, proc.stdout
    d = json.loads(kit.run_real("status", "--json", config_venv, env=kit.env_with([pins])).stdout)
    (note,) = [n for n in d["notes"] if CONFIG_REL in n]
    assert "a directory" in note and "VLLM_PLE_CPU_OFFLOAD=0" in note
    assert d["set"]["files"] == [LAYER_REL]


def test_every_suggested_apply_of_an_unpinned_config_set_is_the_opt_in(config_venv, pins, tmp_path):
    """The layer pinned, vllm/config/vllm.py unpinned (as a release ships it): `verify` and the
    preflight suggest `apply --allow-unknown` (a plain apply exits 4), and the suggestion works."""
    from ple4patch.errors import EXIT_OK, EXIT_UNPINNED

    env = kit.env_with([pins])
    proc = kit.run_real("verify", config_venv, env=env)
    words = " ".join(" ".join(kit.shell_lines(proc.stderr)).split())  # ` \` continuations joined
    assert proc.returncode != EXIT_OK and f"run `ple4patch apply --allow-unknown {config_venv}`" in words, words
    assert kit.run_real("apply", config_venv, env=env).returncode == EXIT_UNPINNED
    ckpt = tmp_path / "ckpt"
    import ckpt_factory
    ckpt_factory.make(ckpt, "nvfp4_rowpacked")
    d = kit.json_of(kit.run_real("inspect", ckpt, config_venv, "--tp", "4", "--json", env=env))
    files = [f for f in d["preflight"]["findings"] if f["area"] == "files" and f["blocks"]]
    assert files and all(f["change"] == f"ple4patch apply --allow-unknown {config_venv}" for f in files), files
    assert kit.run_real("apply", "--allow-unknown", config_venv, env=env).returncode == EXIT_OK
    assert kit.run_real("verify", config_venv, env=env).returncode == EXIT_OK


def test_a_fresh_config_era_install_is_unpinned_not_mixed(config_venv, pins):
    """Layer pinned and pristine, vllm/config/vllm.py unpinned, nothing patched: the set is
    `unpinned` (as installed), never `mixed` (the word for a half-applied set)."""
    d = kit.json_of(kit.run_real("status", "--json", config_venv, env=kit.env_with([pins])))
    assert [f["state"] for f in d["files"]] == ["pristine", "unpinned"] and d["set"]["state"] == "unpinned", d


def test_an_unusable_local_pins_file_of_the_config_module_is_named(config_venv, pins, tmp_path):
    """vllm/config/vllm.py applied with --allow-unknown, then its local pins file
    (.ple4patch-pins.config_vllm.json) damaged: status, verify, apply and the preflight name that
    file and the steps (move it away, revert, apply --allow-unknown), not a reinstall; the
    steps as said patch the set again."""
    from ple4patch.errors import EXIT_MODIFIED, EXIT_OK, EXIT_VERIFY_FAILED

    env = kit.env_with([pins])
    assert kit.run_real("apply", "--allow-unknown", config_venv, env=env).returncode == EXIT_OK
    local = kit.site_packages(config_venv) / ".ple4patch-pins.config_vllm.json"
    local.write_text("[]")
    steps = (f"move {local} away", f"then `ple4patch revert {config_venv}`",
             f"then `ple4patch apply --allow-unknown {config_venv}`")

    d = kit.json_of(kit.run_real("status", "--json", config_venv, env=env))
    assert [f["state"] for f in d["files"]] == ["patched", "modified"]
    assert all(step in d["message"] for step in steps) and "reinstall" not in d["message"], d["message"]
    for args, code in ((("verify",), EXIT_VERIFY_FAILED), (("apply",), EXIT_MODIFIED),
                       (("apply", "--allow-unknown"), EXIT_MODIFIED)):
        proc = kit.run_real(*args, "--json", config_venv, env=env)
        d = kit.json_of(proc)
        assert proc.returncode == code and f"{local} is unusable" in d["error"]["message"], (args, d)
        assert all(step in d["error"]["message"] for step in steps), (args, d)
    ckpt = tmp_path / "ckpt"
    import ckpt_factory
    ckpt_factory.make(ckpt, "nvfp4_rowpacked")
    d = kit.json_of(kit.run_real("inspect", ckpt, config_venv, "--tp", "4", "--json", env=env))
    blocking = [f for f in d["preflight"]["findings"] if f["blocks"] and CONFIG_REL in f["message"]]
    assert blocking and all(all(step in f["change"] for step in steps) for f in blocking), blocking
    assert local.read_text() == "[]"

    local.rename(tmp_path / "mine.json")
    for args in (("revert",), ("apply", "--allow-unknown"), ("verify",)):
        assert kit.run_real(*args, config_venv, env=env).returncode == EXIT_OK, args

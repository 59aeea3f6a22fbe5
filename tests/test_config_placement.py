"""The era before the start-up policy file: the release places the PLE table from
``vllm/config/vllm.py``, which ple4patch reads and never patches, and says so.

Three layers of checks:

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
- status, apply (text and --json) on the stand-in engine as a real wheel (the PLE layer and that
  stand-in ``vllm/config/vllm.py``): one note naming the file and what to do, exit codes as ever;
  and no note on a runtime_defaults-era engine, nor on one whose ``vllm/config/vllm.py`` places
  nothing.
"""

from __future__ import annotations

import ast
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
from ple4patch.policy_file import CASCADE_FUNCTION, CONFIG_DEFAULTS, CONFIG_SKIPPED_BY, HYBRID_FUNCTION
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

def _row(name: str):
    rows = [r for r in engine_corpus.indexed(name) if r.label == LABEL]
    assert len(rows) == 1, f"tests/data/engines/INDEX.md has no single {LABEL} {name} row"
    return rows[0]


def _real(name: str) -> str:
    row = _row(name)
    if not row.present:
        pytest.skip(f"{row.path} is absent (real engine files are not committed)")
    return engine_corpus.check(row).decode("utf-8")


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return fn


def _run_def(fn: ast.FunctionDef, namespace: dict):
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "<engine>", "exec"), namespace)
    return namespace[fn.name]


def _default_gate(tree: ast.Module) -> ast.expr:
    """The `not any(name in os.environ for name in (...))` of the `if` that calls the hybrid default."""
    (gate,) = [
        n.test for n in ast.walk(tree)
        if isinstance(n, ast.If) and any(  # the call stands in the if's own body, not a nested one
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and getattr(s.value.func, "id", None) == HYBRID_FUNCTION for s in n.body)
    ]
    (skip,) = [n for n in ast.walk(gate) if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
               and isinstance(n.operand, ast.Call) and getattr(n.operand.func, "id", None) == "any"]
    return skip


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
    tree = ast.parse(_real("vllm.py"))

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

    def admit(environ: dict, storage: str, quant_config=None) -> tuple[bool, str | None]:
        fn = _run_def(_function(tree, CASCADE_FUNCTION), {
            "envs": _Envs(environ), "torch": SimpleNamespace(float16="float16"),
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


# -- status and apply on the engine ------------------------------------------------------

@pytest.fixture(scope="module")
def pins(tmp_path_factory):
    path, _pin = kit.standin_manifest(tmp_path_factory.getbasetemp())
    return path


@pytest.fixture
def config_venv(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine_config_era(kit.standin_bytes(), kit.config_era_bytes()))


def _note_lines(text: str) -> list[str]:
    return [line for line in kit.logical_lines(text) if CONFIG_REL in line]


def test_status_and_apply_say_where_the_placement_is(config_venv, pins):
    env = kit.env_with([pins])
    man = m.load([pins], use_env=False)
    note = assess_set(find_engine(config_venv), man).config.note()
    assert note.startswith(f"{CONFIG_REL} moves the PLE table off the GPU workers") and HYBRID_FUNCTION in note
    assert "does not patch it" in note and "`vllm serve` with VLLM_PLE_CPU_OFFLOAD=0 in its environment" in note
    for args in (("status",), ("apply", "--dry-run", "--stat"), ("apply",), ("apply",), ("status",), ("verify",)):
        proc = kit.run_real(*args, config_venv, env=env)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        wide = [line for line in proc.stdout.splitlines()  # a path alone on its line may be longer
                if len(line) > WIDTH and " " in line.strip().removesuffix(CONTINUATION)]
        assert wide == [], proc.stdout
        if args[0] != "verify":  # verify's text is its verdict alone; its JSON carries the note
            assert _note_lines(proc.stdout) == [f"note:    {note}" if args[0] == "status" else f"note: {note}"], (
                args, proc.stdout)
        d = kit.json_of(kit.run_real(*args, "--json", config_venv, env=env))
        assert d["exit_code"] == 0 and d["notes"].count(note) == 1, (args, d["notes"])
        assert d["set"]["files"] == ["vllm/models/qwen4_exp/nvidia/ple_layer.py"]
        if args[0] != "verify":
            assert d["message"].count(note) == 1, args
    assert kit.sha(kit.site_packages(config_venv) / CONFIG_REL) == kit.sha256_hex(kit.config_era_bytes())


def test_no_note_without_the_placement(wheelhouse, engine_venv, pins, tmp_path):
    """A runtime_defaults-era engine (its placement is in the set), an engine without
    vllm/config/vllm.py, and one whose vllm/config/vllm.py places nothing: no note."""
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
            assert assess_set(find_engine(venv), m.load(mans, use_env=False)).config is None


def test_an_unreadable_config_module_is_said_so(config_venv, pins):
    """Something other than a readable regular file at vllm/config/vllm.py: not read (never a
    FIFO or a device), status still works and exits 0, and its note says the placement is
    unknown and what makes the start safe either way."""
    path = kit.site_packages(config_venv) / CONFIG_REL
    path.unlink()
    path.mkdir()
    proc = kit.run_real("status", config_venv, env=kit.env_with([pins]))
    assert proc.returncode == 0 and f"{CONFIG_REL} cannot be read" in proc.stdout, proc.stdout
    d = json.loads(kit.run_real("status", "--json", config_venv, env=kit.env_with([pins])).stdout)
    (note,) = [n for n in d["notes"] if CONFIG_REL in n]
    assert "a directory" in note and "VLLM_PLE_CPU_OFFLOAD=0" in note

"""The kernel config of a vLLM command line, as the engine's parser merges it (the injected policy's
``ple4_policy_kernel_config``), and when the patched policy reads this process's command line.

What these tests mirror: ``FlexibleArgumentParser.parse_args`` and ``load_config_file``
(vllm/utils/argparse_utils.py, 1CatAI/1Cat-vLLM 92a785cb21e2b2acbd4be1dfd87e799c9c632a37): option
names take ``-`` for ``_`` up to the first ``.``; ``--KEY.SUB VALUE`` pairs (JSON, else the text)
merge into one ``--KEY JSON`` appended after every other option; ``--KEY.SUB+ a,b`` is a list;
``--config FILE.yaml`` is replaced by the file's options before the others. ``--kernel-config``
is one argparse option (vllm/engine/arg_utils.py:1517 at ae13773a0deebf583022613c4508e5072cedef91),
so its last value wins, parsed by ``TypeAdapter(KernelConfig).validate_json`` (arg_utils.py:356-359),
whose bool fields take pydantic's words ("yes", "0", ...).
"""

from __future__ import annotations

import json

import pytest

from ple4patch.kernels import nvfp4_policy as p


def kc(*words, files=None):
    return p.ple4_policy_kernel_config(list(words), read_config=(files or {}).__getitem__)


def test_plain_json_last_one_wins_and_underscores_are_dashes():
    assert kc("serve", "m", "--kernel-config", '{"a": 1}') == ({"a": 1}, "--kernel-config")
    assert kc("serve", "m", "--kernel_config={\"a\": 1}", "--kernel-config", '{"b": 2}') == ({"b": 2}, "--kernel-config")
    assert kc("serve", "m", "--max-model-len", "4096") == ({}, None)


def test_dotted_keys_merge_nest_and_replace_a_plain_value():
    keys, given = kc("--kernel-config", '{"ple_disk_cascade": true, "x": 1}',
                     "--kernel-config.ple_disk_cascade=false", "--kernel_config.sm70_gguf.enabled", "no",
                     "--kernel-config.ops+", "a,b", "--kernel-config.ops+=c")
    assert keys == {"ple_disk_cascade": False, "sm70_gguf": {"enabled": "no"}, "ops": ["a", "b", "c"]}
    assert given == "--kernel-config.ple_disk_cascade"


def test_config_file_options_come_first_so_the_command_line_wins():
    files = {"s.yaml": ["--kernel-config", json.dumps({"ple_disk_cascade": True})]}
    assert kc("serve", "m", "--config", "s.yaml", files=files) == (
        {"ple_disk_cascade": True}, "kernel-config in --config s.yaml")
    assert kc("serve", "m", "--kernel-config", "{}", "--config", "s.yaml", files=files)[0] == {}
    dotted = {"d.yaml": ["--kernel-config.ple_disk_cascade", "true"]}
    assert kc("serve", "m", "--config", "d.yaml", files=dotted)[1] == "--kernel-config.ple_disk_cascade in --config d.yaml"


def test_yaml_file_is_read_as_the_engine_reads_it(tmp_path):
    pytest.importorskip("yaml")  # libcst, a dependency of ple4patch, requires pyyaml
    f = tmp_path / "serve.yaml"
    f.write_text("enforce-eager: true\nport: 8000\nkernel_config:\n  ple_disk_cascade: true\n")
    assert p._ple4_yaml_words(str(f), None) == [
        "--enforce-eager", "--port", "8000", "--kernel_config", '{"ple_disk_cascade": true}']
    assert p.ple4_policy_cli_cascade(["serve", "m", "--config", str(f)]) == (True, f"kernel-config in --config {f}")


@pytest.mark.parametrize("value, read", [
    (True, True), (False, False), (1, True), (0, False), ("YES", True), (" on ", True), ("t", True),
    ("false", False), ("off", False), ("n", False), ("maybe", None), (2, None), (None, None), ([], None),
])
def test_bool_words_as_the_config_reads_them(value, read):
    assert p.ple4_policy_bool(value) is read


def test_a_plain_value_that_is_not_a_json_object_names_the_option():
    for bad in ("{not json", "[1]", "true"):
        with pytest.raises(ValueError, match=r"^--kernel-config takes one JSON object, got .*: quote it for the shell"):
            kc("--kernel-config", bad)


@pytest.mark.parametrize("argv, read", [
    (["/opt/engine/bin/vllm", "serve", "m"], True),
    (["/opt/engine/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", "--model", "m"], True),
    (["/opt/engine/lib/python3.12/site-packages/vllm/entrypoints/cli/main.py", "serve", "m"], True),
    (["/home/me/run_llm.py", "--kernel-config", "{}"], False),
    (["-c"], False),
    ([], False),
])
def test_which_command_lines_are_the_engines(monkeypatch, argv, read):
    monkeypatch.setattr("sys.argv", argv)
    assert (p._ple4_policy_command_line() == argv[1:]) if read else p._ple4_policy_command_line() is None


class _Cfg:
    """Just what the rules read of a VllmConfig (model_config.hf_text_config.ple_embedding_dtype)."""

    def __init__(self, dtype):
        text = type("Text", (), {"ple_embedding_dtype": dtype})()
        self.model_config = type("Model", (), {"hf_text_config": text, "hf_config": text, "quantization": None})()
        self.load_config = type("Load", (), {"load_format": "auto"})()


def test_the_check_refuses_only_for_an_nvfp4_request(monkeypatch):
    monkeypatch.setattr("sys.argv", ["/opt/engine/bin/vllm", "serve", "m", "--kernel-config.ple_disk_cascade", "1"])
    p.ple4_policy_check(_Cfg("float8_e4m3fn"), defaults=None)  # another table: the engine's placement, untouched
    with pytest.raises(ValueError, match=r"ple_disk_cascade=true \(given by --kernel-config.ple_disk_cascade\) is set"):
        p.ple4_policy_check(_Cfg("nvfp4_rowpacked"), defaults=None)


def test_words_the_engine_would_reject_are_left_to_the_engine(monkeypatch):
    """The engine's parser has accepted the words before the policy runs; a value the reader cannot
    read (or a missing --config file) judges nothing rather than failing the start."""
    monkeypatch.setattr("sys.argv", ["/opt/engine/bin/vllm", "serve", "m", "--config", "/nonexistent.yaml"])
    assert p.PLE4_POLICY_CASCADE not in p.ple4_policy_settings(_Cfg("nvfp4_rowpacked"), environ={})
    monkeypatch.setattr("sys.argv", ["/opt/engine/bin/vllm", "serve", "m", "--kernel-config", "{bad"])
    assert p.PLE4_POLICY_CASCADE not in p.ple4_policy_settings(_Cfg("nvfp4_rowpacked"), environ={})


@pytest.mark.parametrize("words, cascade", [
    # argparse takes an unambiguous prefix of an option (vLLM's parser keeps allow_abbrev), and the
    # dotted form of a prefix becomes that prefix with JSON, which argparse then matches
    (["--kernel", '{"ple_disk_cascade": true}'], True),
    (["--kernel-c=" '{"ple_disk_cascade": true}'], True),
    (["--ke", '{"ple_disk_cascade": true}'], True),
    (["--kernel_c.ple_disk_cascade", "true"], True),
    (["--k", '{"ple_disk_cascade": true}'], None),  # ambiguous (--kv-...): the engine's parser refuses it
    (["--kernel-config-x", '{"ple_disk_cascade": true}'], None),  # another option
    (["--kernel-configx", '{"ple_disk_cascade": true}'], None),
])
def test_prefixes_of_the_option_are_the_option(words, cascade):
    got = p.ple4_policy_cli_cascade(["serve", "m", *words])
    assert (got[0] if got else None) is cascade


def test_each_spelling_of_the_dotted_form_is_one_value_and_the_last_spelling_wins():
    """The engine's parser keeps one merged dict per spelled key (``--kernel`` and
    ``--kernel-config`` are two) and appends them in the order they first appear; argparse keeps
    the last, whole."""
    keys, given = kc("--kernel-config.ple_disk_cascade", "true", "--kernel.moe_backend", "triton")
    assert keys == {"moe_backend": "triton"} and p.ple4_policy_cli_cascade(
        ["--kernel-config.ple_disk_cascade", "true", "--kernel.moe_backend", "triton"]) is None
    keys, given = kc("--kernel.moe_backend", "triton", "--kernel-config.ple_disk_cascade", "true",
                     "--kernel.x", "1")
    assert keys == {"ple_disk_cascade": True} and given == "--kernel-config.ple_disk_cascade"


def test_a_config_that_is_not_a_regular_file_is_never_opened_for_reading(tmp_path, monkeypatch):
    """The engine's parser has read a FIFO's contents already; a second read would wait for a
    writer forever. The policy judges nothing instead, at once."""
    import os
    import signal

    fifo = tmp_path / "serve.yaml"
    os.mkfifo(fifo)
    monkeypatch.setattr("sys.argv", ["/opt/engine/bin/vllm", "serve", "m", "--config", str(fifo)])
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("reading the --config FIFO blocked"))
    signal.alarm(5)
    try:
        assert p.PLE4_POLICY_CASCADE not in p.ple4_policy_settings(_Cfg("nvfp4_rowpacked"), environ={})
        with pytest.raises(ValueError, match="is not a regular file"):
            p._ple4_yaml_words(str(fifo), None)
    finally:
        signal.alarm(0)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (p.PLE4_POLICY_CONFIG_FILE_LIMIT + 1))
    with pytest.raises(ValueError, match="larger than"):
        p._ple4_yaml_words(str(big), None)


@pytest.mark.parametrize("argv", [5, None, [b"/opt/engine/bin/vllm", 3], ["vllm", None]])
def test_an_odd_argv_judges_nothing(monkeypatch, argv):
    monkeypatch.setattr("sys.argv", argv)
    assert p.PLE4_POLICY_CASCADE not in p.ple4_policy_settings(_Cfg("nvfp4_rowpacked"), environ={})


def test_a_relative_entrypoint_path_is_a_vllm_command_line(monkeypatch):
    monkeypatch.setattr("sys.argv", ["vllm/entrypoints/openai/api_server.py", "--model", "m"])
    assert p._ple4_policy_command_line() == ["--model", "m"]


# -- against the engine's own parser (a real file of tests/data/engines, when present) --------------

def _real_parser_module(monkeypatch):
    """vllm/utils/argparse_utils.py of 1CatAI/1Cat-vLLM ae13773a, imported as it is, with what it
    imports that this venv lacks: ``regex`` (the stdlib ``re`` covers its patterns) and
    ``vllm.logger``."""
    import importlib.util
    import logging
    import re
    import sys
    import types

    from tools import engine_corpus

    rows = [r for r in engine_corpus.corpus_files("argparse_utils.py")]
    if not rows:
        pytest.skip("tests/data/engines/main-ae13773a/argparse_utils.py is absent (real engine files are not committed)")
    engine_corpus.check(rows[0])
    logger_mod = types.ModuleType("vllm.logger")
    logger_mod.init_logger = lambda name: logging.getLogger(name)
    for name, mod in (("regex", re), ("vllm", types.ModuleType("vllm")), ("vllm.logger", logger_mod)):
        if name == "regex" or name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("real_argparse_utils", rows[0].path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _engine_cascade(module, argv):
    """What the engine's parser makes of `argv` for KernelConfig.ple_disk_cascade: True/False
    when given, None when not, "refused" when the parser refuses the command line. The option
    is declared as arg_utils.py:1517 declares it (ae13773a), its JSON read as a dict (the bool
    words of pydantic are `ple4_policy_bool`'s, checked above)."""
    import contextlib
    import io

    parser = module.FlexibleArgumentParser(prog="vllm")
    serve = parser.add_subparsers(dest="subparser").add_parser("serve")
    serve.add_argument("model_tag", nargs="?")
    serve.add_argument("--config", default="")
    serve.add_argument("--kernel-config", type=json.loads, default=None)
    serve.add_argument("--kv-cache-dtype", default="auto")
    serve.add_argument("--kv-cache-memory-bytes", default=None)
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            ns = parser.parse_args(list(argv))
    except (SystemExit, ValueError, AssertionError, IndexError):
        return "refused"
    keys = ns.kernel_config
    if not isinstance(keys, dict):
        return "refused" if keys is not None else None
    if "ple_disk_cascade" not in keys:
        return None
    value = p.ple4_policy_bool(keys["ple_disk_cascade"])
    return "refused" if value is None else value


ON, OFF = '{"ple_disk_cascade": true}', '{"ple_disk_cascade": false}'
COMMAND_LINES = [
    ["serve", "m"],
    ["serve", "m", "--kernel-config", ON],
    ["serve", "m", f"--kernel-config={OFF}"],
    ["serve", "m", "--kernel_config", ON, "-tp", "4"],
    ["serve", "m", "--kernel-config", ON, "--kernel-config", "{}"],
    ["serve", "m", "--kernel-config", "{}", "--kernel-config", ON],
    ["serve", "m", "--kernel-config.ple_disk_cascade", "true"],
    ["serve", "m", "--kernel-config.ple_disk_cascade=false", "--kernel-config", ON],
    ["serve", "m", "--kernel-config.ple_disk_cascade", "yes", "--kernel-config.moe_backend", "triton"],
    ["serve", "m", "--kernel-config.ple_disk_cascade", "true", "--kernel.moe_backend", "triton"],
    ["serve", "m", "--kernel.moe_backend", "triton", "--kernel-config.ple_disk_cascade", "true"],
    ["serve", "m", "--kernel", ON],
    ["serve", "m", "--kernel-c=" + ON],
    ["serve", "m", "--ke", ON],
    ["serve", "m", "--kernel_c.ple_disk_cascade", "1"],
    ["serve", "m", "--k", ON],
    ["serve", "m", "--kernel-config-x", ON],
    ["serve", "m", "--kv-cache-dtype", "fp8", "--kernel-config", OFF],
    ["serve", "--model", "m", "--kernel-config", ON],
    ["serve", "m", "--config", "on.yaml"],
    ["serve", "m", "--config", "on.yaml", "--kernel-config", OFF],
    ["serve", "m", "--kernel-config", OFF, "--config", "on.yaml"],
    ["serve", "m", "--config", "dotted.yaml"],
    ["serve", "m", "--config", "under.yaml", "-tp", "2"],
    ["serve", "m", "--config", "prefix.yaml"],
    ["serve", "m", "--config", "other.yaml"],
]
YAML_FILES = {
    "on.yaml": "port: 8001\nkernel-config:\n  ple_disk_cascade: true\n",
    "dotted.yaml": "kernel-config.ple_disk_cascade: 'true'\n",
    "under.yaml": "kernel_config: '{\"ple_disk_cascade\": 1}'\n",
    "prefix.yaml": "kernel:\n  ple_disk_cascade: true\n",
    "other.yaml": "kv-cache-dtype: fp8\n",
}


def test_the_reader_agrees_with_the_engines_own_parser(tmp_path, monkeypatch):
    pytest.importorskip("yaml")
    module = _real_parser_module(monkeypatch)
    monkeypatch.chdir(tmp_path)
    for name, text in YAML_FILES.items():
        (tmp_path / name).write_text(text)
    seen = {True: 0, False: 0, None: 0}
    for argv in COMMAND_LINES:
        engine = _engine_cascade(module, argv)
        if engine == "refused":
            continue  # the engine does not start: what ple4patch reads does not matter
        got = p.ple4_policy_cli_cascade(argv)
        assert (got[0] if got else None) is engine, argv
        seen[engine] += 1
    assert all(seen.values()), seen  # the list reaches true, false and not given

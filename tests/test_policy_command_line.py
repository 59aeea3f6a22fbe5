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
        with pytest.raises(ValueError, match=r"^--kernel-config takes a JSON object, got "):
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

"""`ple4patch inspect CHECKPOINT_DIR VENV`: the preflight of `vllm serve`.

On the stand-in engine as a real wheel with its two files (the PLE layer and the start-up
policy that mirrors 1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6's
vllm/platforms/runtime_defaults.py, which sets VLLM_PLE_CPU_OFFLOAD=1/VLLM_PLE_DISK_OFFLOAD=1
in `_apply_sm70_qwen38_disk_ple_defaults` and admits the disk cascade in
`_qwen4exp_ple_cascade_requested`), and on a one-file release (no policy file): one verdict,
the blockers named with what to change, JSON valid against the shipped schema.
"""

from __future__ import annotations

import dataclasses

import json

import pytest
from click.testing import CliRunner

import kit
from ple4patch import commands, preflight
from ple4patch import manifest as m
from ple4patch.cli import main
from ple4patch.errors import EXIT_CHECKPOINT, EXIT_OK, UsageError
from ple4patch.paths import CONFIG_REL, POLICY_REL, TARGET_REL
from ple4patch.policy_file import CONFIG_DEFAULTS

ckpt_factory = pytest.importorskip("ckpt_factory")


@pytest.fixture(scope="session")
def set_pins(tmp_path_factory):
    return kit.standin_set_manifests(tmp_path_factory.getbasetemp())


@pytest.fixture
def pins_env(set_pins, monkeypatch):
    """The pins of the stand-in's two files, as PLE4PATCH_EXTRA_MANIFESTS (the preflight reads
    the manifests as every command does)."""
    monkeypatch.setenv("PLE4PATCH_EXTRA_MANIFESTS", ":".join(map(str, set_pins[0])))
    return {"PLE4PATCH_EXTRA_MANIFESTS": ":".join(map(str, set_pins[0]))}


@pytest.fixture
def set_venv(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine_set(kit.standin_bytes(), kit.standin_policy_bytes()))


@pytest.fixture
def patched_set_venv(set_venv, pins_env):
    assert commands.apply.run(set_venv).exit_code == 0
    return set_venv


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return ckpt_factory.make(tmp_path_factory.mktemp("ckpt") / "nvfp4", "nvfp4_rowpacked")


@pytest.fixture
def meminfo(tmp_path):
    def make(available_kib: int = 64 * 2**20, total_kib: int = 128 * 2**20):
        path = tmp_path / "meminfo"
        path.write_text(f"MemTotal: {total_kib} kB\nMemAvailable: {available_kib} kB\n")
        return str(path)

    return make


def run(ckpt, venv, meminfo, environ=None, **kw):
    r = preflight.run(ckpt, venv, environ=environ or {}, meminfo_path=meminfo(), **kw)
    kit.validate(r.to_json())
    return r


def blockers(r) -> list[tuple[str, str]]:
    return [(b["area"], b["message"]) for b in r.data["preflight"]["blockers"]]


def test_patched_set_in_a_clean_environment_will_start(ckpt, patched_set_venv, meminfo):
    r = run(ckpt, patched_set_venv, meminfo)
    pf = r.data["preflight"]
    assert (r.exit_code, pf["will_start"], pf["blockers"]) == (EXIT_OK, True, [])
    assert r.message.startswith("WILL START") and r.message == pf["verdict"]
    assert [(f["path"], f["state"]) for f in pf["files"]] == [(TARGET_REL, "patched"), (POLICY_REL, "patched")]
    placement = [f["message"] for f in pf["findings"] if f["area"] == "placement"]
    assert placement and "skips the automatic" in placement[0]
    memory = [f["message"] for f in pf["findings"] if f["area"] == "memory"]
    assert memory and f"{r.data['memory']['pinned_bytes_per_host']:,} B" in memory[0] and "fits" in memory[0]


def test_pristine_set_names_both_files_and_the_automatic_placement(ckpt, set_venv, pins_env, meminfo):
    r = run(ckpt, set_venv, meminfo)
    assert r.exit_code == EXIT_CHECKPOINT and r.message.startswith("WILL NOT START")
    found = blockers(r)
    assert ("files", f"{TARGET_REL}: pristine, not patched") in found
    assert ("files", f"{POLICY_REL}: pristine, not patched") in found
    placement = [msg for area, msg in found if area == "placement"]
    assert len(placement) == 2
    assert "VLLM_PLE_CPU_OFFLOAD=1" in placement[0] and preflight.AUTO_DISK_DEFAULTS in placement[0]
    assert "disk cascade" in placement[1]
    changes = [b["change"] for b in r.data["preflight"]["blockers"]]
    assert all(c and f"ple4patch apply {set_venv}" in c for c in changes)


def test_explicit_settings_turn_the_automatic_placement_off(ckpt, set_venv, pins_env, meminfo):
    r = run(ckpt, set_venv, meminfo, environ={"VLLM_PLE_CPU_OFFLOAD": "0"},
            serve_args="--kernel-config '{\"ple_disk_cascade\": false}'")
    assert [area for area, _ in blockers(r)] == ["files", "files"], "only the unpatched files remain"
    msgs = [f["message"] for f in r.data["preflight"]["findings"] if f["area"] == "placement"]
    assert "VLLM_PLE_CPU_OFFLOAD is set explicitly" in msgs[0] and "cascade is off" in msgs[1]


@pytest.mark.parametrize("environ, serve_args, setting, change", [
    ({"VLLM_PLE_CPU_OFFLOAD": "1"}, None, "VLLM_PLE_CPU_OFFLOAD=1", "set VLLM_PLE_CPU_OFFLOAD=0"),
    ({"VLLM_PLE_DISK_OFFLOAD": "true"}, None, "VLLM_PLE_DISK_OFFLOAD=true", "set VLLM_PLE_DISK_OFFLOAD=0"),
    ({"VLLM_SM70_QWEN38_HYBRID_PLE": "1"}, None, "VLLM_SM70_QWEN38_HYBRID_PLE=1", "set VLLM_SM70_QWEN38_HYBRID_PLE=0"),
    ({}, "--kernel-config '{\"ple_disk_cascade\": true}'", "ple_disk_cascade=true", "drop ple_disk_cascade"),
    ({}, "--load-format gguf", "--load-format=gguf", "drop --load-format gguf"),
    ({}, "--max-model-len 4096 -q gguf", "--quantization=gguf", "drop --quantization gguf"),
])
def test_refused_settings_block_with_what_to_change(ckpt, patched_set_venv, meminfo, environ, serve_args, setting,
                                                    change):
    r = run(ckpt, patched_set_venv, meminfo, environ=environ, serve_args=serve_args)
    (b,) = r.data["preflight"]["blockers"]
    assert b["area"] == "environment" and setting in b["message"] and change in b["change"], b
    assert r.exit_code == EXIT_CHECKPOINT and r.message.startswith("WILL NOT START: 1 thing to change")


def test_host_memory_against_the_exact_pinned_bytes(ckpt, patched_set_venv, meminfo):
    r = preflight.run(ckpt, patched_set_venv, environ={}, meminfo_path=meminfo(available_kib=1), tp=2)
    kit.validate(r.to_json())
    (b,) = r.data["preflight"]["blockers"]
    assert b["area"] == "memory" and "does not fit" in b["message"] and "VLLM_QWEN4EXP_PLE_HOST_GIB" in b["change"]
    assert f"{r.data['memory']['pinned_bytes_per_host']:,} B" in b["message"]


def test_serve_args_tensor_parallel_size_sets_the_ranks(ckpt, patched_set_venv, meminfo):
    r = run(ckpt, patched_set_venv, meminfo, serve_args="--tensor-parallel-size 4")
    assert r.data["memory"]["tp"] == 4 and r.exit_code == EXIT_OK


def test_tp_from_neither_option_is_one_rank_and_said(ckpt, patched_set_venv, meminfo):
    r = run(ckpt, patched_set_venv, meminfo)
    assert (r.data["memory"]["tp"], r.data["memory"]["tp_given"]) == (1, False)
    assert "TP1 (--tp not given: pass --tp N for N GPUs)" in r.output
    r = run(ckpt, patched_set_venv, meminfo, serve_args="-tp 2")
    assert (r.data["memory"]["tp"], r.data["memory"]["tp_given"]) == (2, True) and "--tp not given" not in r.output


@pytest.mark.parametrize("serve_args", ["--tensor-parallel-size 4", "-tp 4", "--tensor-parallel-size=4",
                                        "-tp 2 --tensor-parallel-size 4"])
def test_tp_and_serve_args_must_agree(ckpt, patched_set_venv, meminfo, serve_args):
    """--tp 2 with the engine's own option at 4 (the last one given, as argparse takes it) is a
    usage error naming both values; the same value in both is fine."""
    with pytest.raises(UsageError) as info:
        run(ckpt, patched_set_venv, meminfo, serve_args=serve_args, tp=2)
    msg = str(info.value)
    assert "--tp 2" in msg and "4 in --serve-args" in msg and "give one of them" in msg, msg
    r = run(ckpt, patched_set_venv, meminfo, serve_args=serve_args, tp=4)
    assert r.data["memory"]["tp"] == 4 and r.exit_code == EXIT_OK


def test_tp_conflict_is_exit_2_with_the_json_envelope(ckpt, patched_set_venv):
    args = ["inspect", str(ckpt), str(patched_set_venv), "--tp", "2", "--serve-args", "--tensor-parallel-size 4"]
    res = CliRunner().invoke(main, args + ["--json"])
    assert res.exit_code == 2, res.output
    d = kit.validate(json.loads(res.output))
    assert d["ok"] is False and d["exit_code"] == 2 and d["error"]["kind"] == "usage"
    assert "--tp 2" in d["message"] and "--tensor-parallel-size 4" in d["message"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and "--tp 2 disagrees with --tensor-parallel-size 4" in " ".join(res.output.split())


def test_the_model_in_serve_args_must_be_the_checkpoint(ckpt, tmp_path, patched_set_venv, meminfo):
    other = tmp_path / "another-model"
    other.mkdir()
    for serve_args in (f"{other} -tp 2", f"--model {other}", f"--model={other}", f"vllm serve {other} -tp 2",
                       f"/opt/venv/bin/vllm serve {other}", f"serve {other}",
                       f"python3 -m vllm.entrypoints.openai.api_server --model {other}"):
        with pytest.raises(UsageError) as info:
            run(ckpt, patched_set_venv, meminfo, serve_args=serve_args)
        assert str(info.value) == (f"--serve-args names the model {other}, but CHECKPOINT_DIR is {ckpt}: "
                                   "pass the same directory to both"), serve_args
    for serve_args in (f"{ckpt} -tp 2", f"--model {ckpt}/", "nvidia/Qwen3.8-Flash-Next-NVFP4 -tp 2",
                       f"vllm serve {ckpt} -tp 2", f"python -m vllm.entrypoints.openai.api_server --model {ckpt}",
                       "vllm serve Qwen3.8-Flash-Next-NVFP4"):
        assert run(ckpt, patched_set_venv, meminfo, serve_args=serve_args).exit_code == EXIT_OK, serve_args
    assert preflight.parse_serve_args(f"vllm serve {ckpt} -tp 2").tensor_parallel_size == 2


@pytest.mark.parametrize("model", ["/models/other", "./other", "../other", "~/no-such-model-here", "a/b/c"])
def test_a_model_path_that_does_not_exist_is_a_typo_not_a_repo_id(ckpt, patched_set_venv, meminfo, model):
    for serve_args in (f"--model {model} -tp 4", f"vllm serve {model}"):
        with pytest.raises(UsageError, match=f"names the model {model}, which does not exist") as info:
            run(ckpt, patched_set_venv, meminfo, serve_args=serve_args)
        assert f"the same as CHECKPOINT_DIR {ckpt}" in str(info.value)


def test_serve_args_of_another_vllm_command_are_refused():
    with pytest.raises(UsageError, match="`vllm chat` does not start the server"):
        preflight.parse_serve_args("vllm chat")


def test_a_release_without_a_policy_file(ckpt, wheelhouse, engine_venv, pins_env, meminfo):
    venv = engine_venv(wheelhouse.engine(kit.standin_bytes(), version="1.5.1"))
    assert commands.apply.run(venv).exit_code == 0
    r = run(ckpt, venv, meminfo)
    assert r.exit_code == EXIT_OK, blockers(r)
    assert [f["path"] for f in r.data["preflight"]["files"]] == [TARGET_REL]
    (placement,) = [f["message"] for f in r.data["preflight"]["findings"] if f["area"] == "placement"]
    assert "no start-up PLE placement policy" in placement


def test_checkpoint_problems_block_too(tmp_path, patched_set_venv, meminfo):
    bad = ckpt_factory.make(tmp_path / "split", "nvfp4_split", dtype=None)
    r = run(bad, patched_set_venv, meminfo)
    assert r.exit_code == EXIT_CHECKPOINT and any(area == "checkpoint" for area, _ in blockers(r))


def test_serve_args_parsing():
    o = preflight.parse_serve_args("Qwen/x --kernel-config='{\"ple_disk_cascade\": true}' -tp 2 --enforce-eager "
                                   "--load-format safetensors")
    assert (o.cascade, o.tensor_parallel_size) == (True, 2)
    assert o.settings == {"--kernel-config ple_disk_cascade": ("explicit-true", "true"), "--load-format": "safetensors"}
    for bad in ("--kernel-config '{not json'", "--kernel-config '[1]'", "-tp four", "--load-format", "'unclosed",
                "--config /nonexistent/serve.yaml"):
        with pytest.raises(UsageError, match="--serve-args"):
            preflight.parse_serve_args(bad)


def test_cli_text_fits_and_json_validates(ckpt, set_venv, pins_env):
    res = CliRunner().invoke(main, ["inspect", str(ckpt), str(set_venv), "--serve-args", "--load-format gguf"],
                             env={"VLLM_PLE_CPU_OFFLOAD": "1"})
    assert res.exit_code == EXIT_CHECKPOINT, res.output
    out = res.output.replace(str(set_venv), "/opt/engine")
    assert all(len(line) <= 100 for line in out.splitlines()), out
    lines = out.splitlines()
    assert lines[-1].startswith("WILL NOT START") and any(line.startswith("files       ! ") for line in lines)
    assert any("change: set VLLM_PLE_CPU_OFFLOAD=0" in line for line in lines)
    res = CliRunner().invoke(main, ["inspect", str(ckpt), str(set_venv), "--json"], env={"VLLM_PLE_CPU_OFFLOAD": "1"})
    d = kit.validate(json.loads(res.stdout))
    assert d["preflight"]["settings"] == {"VLLM_PLE_CPU_OFFLOAD": "1"} and d["ok"] is False
    res = CliRunner().invoke(main, ["inspect", str(ckpt), "--serve-args", "-tp 2"])
    assert res.exit_code == 2 and "needs VENV" in res.stderr


def test_inspect_without_venv_is_no_preflight(ckpt):
    res = CliRunner().invoke(main, ["inspect", str(ckpt), "--json"])
    d = kit.validate(json.loads(res.stdout))
    assert "preflight" not in d and d["exit_code"] == EXIT_OK


def test_manifest_is_read_as_by_the_commands(set_pins):
    """The pins the fixtures rely on are the stand-in's two files."""
    man = m.load(set_pins[0], use_env=False)
    assert {p.target for p in man.pins.values()} >= {TARGET_REL, POLICY_REL}


# -- the host budget as the installed release's patched loader applies it ----------------------------

from ple4patch.ckpt.venv_engine import host_budget_rule  # noqa: E402
from ple4patch.sentinel import strip_injected  # noqa: E402

RULES_OF_SHARED = {  # ../shared/engines: what each release's ple_layer.py defines or imports
    "1cat-vllm-main-036318a0": "fair_share",  # _ple_host_budget_bytes, cap_host_budget_bytes, ...
    "1cat-vllm-main-15a8d185": "fair_share",  # ple_host_budget_bytes, cap_host_budget_bytes, ...
    "1cat-vllm-fork-a223f046": "none",  # no host budget at all
}


def test_host_budget_rule_of_each_release():
    assert host_budget_rule("from ..common.ple import ple_host_budget_bytes\n") == "configured"
    assert host_budget_rule(
        "from ..common.ple import (cap_host_budget_bytes, available_host_bytes, total_host_bytes,\n"
        "    ple_host_budget_bytes, ple_host_reserve_bytes)\n") == "fair_share"
    assert host_budget_rule("def forward(self): pass\n") == "none"
    from ple4patch.transform import patch_source

    rows = kit.shared_engines()
    if not rows:
        pytest.skip("../shared/engines is absent")
    for row in rows:
        text = row.path.read_text()
        assert host_budget_rule(text) == RULES_OF_SHARED[row.folder], row.folder
        # Judged on the release's own text: the injected loader names these helpers too.
        assert host_budget_rule(strip_injected(patch_source(text))) == RULES_OF_SHARED[row.folder]


@pytest.fixture
def fair_share_venv(wheelhouse, engine_venv):
    rows = {row.folder: row for row in kit.shared_engines()}
    if "1cat-vllm-main-15a8d185" not in rows:
        pytest.skip("../shared/engines is absent")
    venv = engine_venv(wheelhouse.engine(rows["1cat-vllm-main-15a8d185"].path.read_bytes(), version="1.5.2"))
    assert commands.apply.run(venv).exit_code == 0
    return venv


def test_without_a_budget_a_fair_share_release_puts_the_rest_in_vram(ckpt, fair_share_venv, meminfo):
    """15a8d185's patched loader: no VLLM_QWEN4EXP_PLE_HOST_GIB -> each rank keeps
    min(share, max(0, MemAvailable - MemTotal/4) // ranks) in host memory, the rest in VRAM: on a
    host without room it still starts, with the rows in VRAM (a warning, not a blocker)."""
    r = preflight.run(ckpt, fair_share_venv, environ={}, meminfo_path=meminfo(available_kib=32 * 2**10 + 1,
                      total_kib=128 * 2**10), tp=2)
    kit.validate(r.to_json())
    mem = r.data["memory"]
    fair = max(0, (32 * 2**20 + 2**10) - 128 * 2**20 // 4) // 2  # 512 B a rank, less than its share
    assert mem["host_budget_source"].startswith("fair share") and mem["host_budget_bytes"] == fair
    assert mem["vram_rows_per_rank"] > 0 and mem["fits"] is True
    assert not [b for b in r.data["preflight"]["blockers"] if b["area"] == "memory"]
    assert any("in VRAM" in w["message"] for w in r.data["warnings"]), r.data["warnings"]
    # A budget the user sets is used as given, and then a host without room blocks.
    r = preflight.run(ckpt, fair_share_venv, environ={"VLLM_QWEN4EXP_PLE_HOST_GIB": "4"},
                      meminfo_path=meminfo(available_kib=1), tp=2)
    assert [b["area"] for b in r.data["preflight"]["blockers"]] == ["memory"]


def test_a_release_without_a_host_budget_ignores_one(ckpt, wheelhouse, engine_venv, meminfo):
    rows = {row.folder: row for row in kit.shared_engines()}
    if "1cat-vllm-fork-a223f046" not in rows:
        pytest.skip("../shared/engines is absent")
    venv = engine_venv(wheelhouse.engine(rows["1cat-vllm-fork-a223f046"].path.read_bytes(), version="1.5.0"))
    r = preflight.run(ckpt, venv, environ={"VLLM_QWEN4EXP_PLE_HOST_GIB": "0"}, meminfo_path=meminfo(), tp=2)
    assert r.data["memory"]["host_budget_bytes"] is None and r.data["memory"]["vram_rows_per_rank"] == 0
    assert any("no PLE host budget" in w["message"] for w in r.data["warnings"])


@pytest.mark.parametrize("serve_args, cascade, shown", [
    ("m --kernel-config.ple_disk_cascade true", True, "given by --kernel-config.ple_disk_cascade"),
    ("m --kernel_config.ple_disk_cascade=yes", True, "given by --kernel-config.ple_disk_cascade"),
    ("m --kernel_config '{\"ple_disk_cascade\": 1}'", True, None),
    # the engine's config reads the text "false" as False (pydantic), not as a true string
    ("m --kernel-config '{\"ple_disk_cascade\": \"false\"}'", False, None),
    # the last --kernel-config wins, and the dotted form is appended after every plain one
    ("m --kernel-config '{\"ple_disk_cascade\": true}' --kernel-config '{}'", None, None),
    ("m --kernel-config.ple_disk_cascade false --kernel-config '{\"ple_disk_cascade\": true}'", False, None),
])
def test_serve_args_read_the_kernel_config_as_the_engine_merges_it(serve_args, cascade, shown):
    o = preflight.parse_serve_args(serve_args)
    assert o.cascade is cascade
    setting = o.settings.get(preflight.CASCADE_SETTING)
    assert (setting is not None) == bool(cascade)
    if shown:
        assert shown in setting[1]


def test_serve_args_read_a_config_file_as_vllm_serve_does(tmp_path, monkeypatch):
    pytest.importorskip("yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "serve.yaml").write_text("tensor-parallel-size: 4\nkernel-config:\n  ple_disk_cascade: true\n")
    o = preflight.parse_serve_args("m --config serve.yaml")
    assert (o.tensor_parallel_size, o.cascade) == (4, True)
    assert o.settings[preflight.CASCADE_SETTING][1] == "true (given by kernel-config in --config serve.yaml)"
    # the command line wins over the file (its options are read first)
    o = preflight.parse_serve_args("m --config serve.yaml -tp 2 --kernel-config '{\"ple_disk_cascade\": false}'")
    assert (o.tensor_parallel_size, o.cascade) == (2, False)
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(UsageError, match="--config list.yaml: a YAML mapping"):
        preflight.parse_serve_args("m --config list.yaml")


@pytest.fixture
def config_era_venv(wheelhouse, engine_venv, pins_env):
    """An engine of the era before the policy file whose PLE layer alone is patched (as an older
    ple4patch left it), and whose vllm/config/vllm.py, a member of the set, is as shipped and
    unpinned (tests/fixtures/config_era, shaped like ChainZeaxion/1Cat-vLLM ebeb346a's:
    `_apply_sm70_qwen38_hybrid_ple_defaults` unless one of the three PLE variables is in
    os.environ, and the FP8-only cascade)."""
    from ple4patch.paths import backup_path
    from ple4patch.transform import patch_source

    venv = engine_venv(wheelhouse.engine_config_era(kit.standin_bytes(), kit.config_era_bytes()))
    layer = kit.site_packages(venv) / TARGET_REL
    pristine = layer.read_bytes()
    backup_path(layer).write_bytes(pristine)
    layer.write_text(patch_source(pristine.decode()))
    return venv


def test_config_era_member_patched_needs_no_variable(ckpt, config_era_venv, meminfo):
    """`apply --allow-unknown` patches vllm/config/vllm.py too: the start needs no PLE variable."""
    assert commands.apply.run(config_era_venv, allow_unknown=True).exit_code == 0
    r = run(ckpt, config_era_venv, meminfo)
    assert (r.exit_code, blockers(r)) == (EXIT_OK, []), blockers(r)
    assert [(f["path"], f["state"]) for f in r.data["preflight"]["files"]] == [(TARGET_REL, "patched"),
                                                                            (CONFIG_REL, "patched")]
    (line,) = placement(r)
    assert line["message"].startswith(f"{CONFIG_REL} is patched: for an NVFP4 request it skips its automatic PLE "
                                      "placement (_apply_sm70_qwen38_hybrid_ple_defaults)"), line
    # an explicit conflicting value is still refused, and unsetting it is enough now
    r = run(ckpt, config_era_venv, meminfo, environ={"VLLM_PLE_CPU_OFFLOAD": "1"})
    (env,) = [f for f in r.data["preflight"]["findings"] if f["area"] == "environment"]
    assert env["blocks"] and env["change"] == "set VLLM_PLE_CPU_OFFLOAD=0"


def placement(r) -> list[dict]:
    return [f for f in r.data["preflight"]["findings"] if f["area"] == "placement"]


def test_config_era_automatic_placement_blocks_until_patched_or_the_variable_is_set(ckpt, config_era_venv, meminfo):
    r = run(ckpt, config_era_venv, meminfo)
    assert r.exit_code == EXIT_CHECKPOINT
    assert [(f["path"], f["state"]) for f in r.data["preflight"]["files"]] == [(TARGET_REL, "patched"),
                                                                            (CONFIG_REL, "unpinned")]
    (b,) = r.data["preflight"]["blockers"]  # the file's state alone blocks nothing: its placement does
    assert b["area"] == "placement" and f"{CONFIG_REL}, not patched" in b["message"]
    assert "_apply_sm70_qwen38_hybrid_ple_defaults" in b["message"]
    assert b["change"] == (f"ple4patch apply --allow-unknown {config_era_venv} (patches {CONFIG_REL} too), or "
                           "export VLLM_PLE_CPU_OFFLOAD=0 in the shell that starts vllm serve")
    assert r.message.startswith("WILL NOT START: 1 thing to change")
    cascade = placement(r)[1]
    assert not cascade["blocks"] and "FP8 PLE storage only" in cascade["message"]

    for name in ("VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE"):
        r = run(ckpt, config_era_venv, meminfo, environ={name: "0"})  # the engine's rule: set at all
        assert (r.exit_code, blockers(r)) == (EXIT_OK, []), (name, blockers(r))
        assert f"does not apply: {name} is set in the environment" in placement(r)[0]["message"]
        assert r.message.startswith("WILL START")


def test_config_era_conflicting_value_is_changed_not_unset(ckpt, config_era_venv, meminfo):
    """VLLM_PLE_CPU_OFFLOAD=1 skips the default but the NVFP4 table refuses it; unsetting it
    would bring the default back, so the one change named is to set it to 0 (and the placement
    line does not say otherwise)."""
    r = run(ckpt, config_era_venv, meminfo, environ={"VLLM_PLE_CPU_OFFLOAD": "1"})
    (b,) = blockers(r)
    assert b[0] == "environment"
    (env,) = [f for f in r.data["preflight"]["findings"] if f["area"] == "environment"]
    assert env["change"].startswith("set VLLM_PLE_CPU_OFFLOAD=0, not unset") and "unset VLLM" not in env["change"]
    line = placement(r)[0]["message"]
    assert "does not apply" in line and "unset" not in line and not placement(r)[0]["blocks"]


def test_config_era_text_fits_and_json_validates(ckpt, config_era_venv, monkeypatch):
    for name in ("VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD", "VLLM_SM70_QWEN38_HYBRID_PLE"):
        monkeypatch.delenv(name, raising=False)  # the CLI judges this process's environment
    res = CliRunner().invoke(main, ["inspect", str(ckpt), str(config_era_venv), "--json"])
    d = kit.validate(json.loads(res.output))
    assert res.exit_code == EXIT_CHECKPOINT and d["preflight"]["blockers"][0]["area"] == "placement"
    res = CliRunner().invoke(main, ["inspect", str(ckpt), str(config_era_venv)])
    assert "export VLLM_PLE_CPU_OFFLOAD=0" in res.output and "apply --allow-unknown" in res.output
    assert all(len(line) <= 100 for line in res.output.splitlines() if " " in line.strip()), res.output


def test_a_runtime_defaults_era_engine_gets_no_config_finding(ckpt, patched_set_venv, meminfo):
    r = run(ckpt, patched_set_venv, meminfo)
    assert not any("vllm/config/vllm.py" in f["message"] for f in r.data["preflight"]["findings"])


@pytest.mark.parametrize("functions, cascade, blocking, line", [
    (("_apply_sm70_qwen38_disk_ple_defaults",), None, 1,
     "VLLM_SM70_QWEN38_HYBRID_PLE=0, VLLM_PLE_CPU_OFFLOAD=1, VLLM_PLE_DISK_OFFLOAD=1"),
    (("_apply_sm70_qwen38_hybrid_ple_defaults", "_qwen4exp_ple_cascade_requested"), "switch", 1,
     "runs only when VLLM_QWEN4EXP_PLE_DISK=1 asks for it"),
    (("_qwen4exp_ple_cascade_requested",), "storage", 0, "takes FP8 PLE storage only"),
    (("_qwen4exp_ple_cascade_requested",), "unknown", 0, "a form ple4patch does not know"),
])
def test_config_placement_findings_of_each_form(tmp_path, functions, cascade, blocking, line):
    from ple4patch.fileset import ConfigPlacement

    config = ConfigPlacement(tmp_path / "vllm.py", functions, cascade, tmp_path)
    found = preflight.config_placement_findings(config, {})
    assert sum(f.blocks for f in found) == blocking and any(line in f.message for f in found), found
    assert all(f.change == "export VLLM_PLE_CPU_OFFLOAD=0 (in the shell that starts vllm serve)"
               for f in found if f.blocks)
    assert not any(f.blocks for f in preflight.config_placement_findings(config, {"VLLM_PLE_DISK_OFFLOAD": ""}))
    assert preflight.config_placement_findings(None, {}) == []
    if any(f in CONFIG_DEFAULTS for f in functions):  # a member: apply is the change, or the variable
        member = dataclasses.replace(config, member=True, state="unpinned")
        (b,) = [f for f in preflight.config_placement_findings(member, {}) if f.blocks]
        assert b.change.startswith(f"ple4patch apply --allow-unknown {tmp_path} (patches") and "VLLM_PLE_CPU_OFFLOAD=0" in b.change
        pinned = dataclasses.replace(member, state="pristine")
        (b,) = [f for f in preflight.config_placement_findings(pinned, {}) if f.blocks]
        assert b.change.startswith(f"ple4patch apply {tmp_path} (patches")
        (line,) = preflight.config_placement_findings(dataclasses.replace(member, state="patched"), {})
        assert not line.blocks and "is patched" in line.message


def test_serve_args_keep_the_model_when_a_config_file_is_given(tmp_path, monkeypatch):
    """`vllm serve /ckpt --config serve.yaml`: the command line's model stays the model (the engine
    puts the file's options after it); a model only in the file is the file's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "port.yaml").write_text("port: 8001\n")
    (tmp_path / "model.yaml").write_text("model: /models/in-file\n")
    assert preflight.parse_serve_args("/ckpt --config port.yaml -tp 1").model == "/ckpt"
    o = preflight.parse_serve_args("--config model.yaml")
    assert (o.model, o.model_option) == ("/models/in-file", "--model /models/in-file")
    assert preflight.parse_serve_args("/ckpt --config model.yaml").model == "/ckpt"


@pytest.mark.parametrize("serve_args, match", [
    ("m --config a.yaml --config b.yaml", "more than once"),
    ("m --config", "--config needs a file"),
    ("m --config serve.json", "only a .yaml or .yml"),
    ("m --config fifo.yaml", "is not a regular file: give a regular YAML file"),
    ("m --config dir.yaml", "is not a regular file|cannot read it"),
    ("m --config bin.yaml", "is not UTF-8 text"),
    ("m --config bad.yaml", "is not valid YAML"),
    ("m --kernel-config x", r"quote it for the shell, as in --kernel-config '\{\"ple_disk_cascade\": false\}'"),
    ("m --kernel-config.ple_disk_cascade", "--kernel-config.ple_disk_cascade needs a value"),
])
def test_serve_args_the_engine_would_refuse_are_usage_errors_naming_what_to_change(tmp_path, monkeypatch,
                                                                                   serve_args, match):
    import os

    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "bad.yaml").write_text("kernel-config: [unclosed\n")
    with pytest.raises(UsageError, match=match) as err:
        preflight.parse_serve_args(serve_args)
    assert str(err.value).startswith("--serve-args: ")


@pytest.fixture(scope="module")
def fp8_ckpt(tmp_path_factory):
    return ckpt_factory.make(tmp_path_factory.mktemp("ckpt") / "fp8", "fp8")


def test_an_fp8_table_on_a_stock_engine_will_start_as_installed(fp8_ckpt, set_venv, pins_env, meminfo):
    """The engine reads an FP8 table unpatched, and the patched policy and loader act on an NVFP4
    request only (ple4_policy_requested): a pristine set, its automatic placement and an offload
    setting block nothing; the JSON holds one verdict."""
    r = run(fp8_ckpt, set_venv, meminfo, environ={"VLLM_PLE_CPU_OFFLOAD": "1"}, tp=4)
    pf = r.data["preflight"]
    assert (r.exit_code, pf["will_start"], pf["blockers"]) == (EXIT_OK, True, []), blockers(r)
    assert r.message.startswith("WILL START") and r.message == pf["verdict"] == r.data["verdict"]
    files = [f["message"] for f in pf["findings"] if f["area"] == "files"]
    assert files == [f"{TARGET_REL}: pristine, not patched: an FP8 table needs no patch (the engine reads it "
                     "as installed)", f"{POLICY_REL}: pristine, not patched: an FP8 table needs no patch (the "
                     "engine reads it as installed)"]
    (placement,) = [f["message"] for f in pf["findings"] if f["area"] == "placement"]
    assert "ple4patch changes nothing for it" in placement
    # the same checkpoint's NVFP4 twin on the same engine still needs the patch
    nvfp4 = run(ckpt_factory.make(fp8_ckpt.parent / "nv", "nvfp4_rowpacked"), set_venv, meminfo, tp=4)
    assert nvfp4.exit_code == EXIT_CHECKPOINT and nvfp4.data["verdict"] == nvfp4.message


def test_an_fp8_table_on_a_real_pristine_engine_will_start(fp8_ckpt, wheelhouse, engine_venv, meminfo):
    rows = {row.folder: row for row in kit.shared_engines()}
    if "1cat-vllm-main-15a8d185" not in rows:
        pytest.skip("../shared/engines is absent")
    venv = engine_venv(wheelhouse.engine(rows["1cat-vllm-main-15a8d185"].path.read_bytes(), version="1.5.2"))
    res = CliRunner().invoke(main, ["inspect", str(fp8_ckpt), str(venv), "--tp", "4", "--json"])
    d = kit.validate(json.loads(res.stdout))
    assert res.exit_code == EXIT_OK and d["verdict"] == d["message"] == d["preflight"]["verdict"], d["message"]
    assert d["engine"]["state"] == "pristine" and d["preflight"]["blockers"] == []


def test_a_checkpoint_of_another_model_starts_as_before(tmp_path, set_venv, pins_env, meminfo):
    """No PLE table and no PLE key in config.json: whatever the engine's patch state, one line
    and exit 0 (README: ple4patch changes nothing for another model)."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8}
    root = ckpt_factory.write(tmp_path / "llama", cfg,
                              {"model.embed_tokens.weight": ckpt_factory.torch.zeros(4, 8)}, index=False)
    r = run(root, set_venv, meminfo, environ={"VLLM_PLE_CPU_OFFLOAD": "1"})
    pf = r.data["preflight"]
    assert (r.exit_code, pf["will_start"], pf["findings"]) == (EXIT_OK, True, [])
    assert r.message == pf["verdict"] == r.data["verdict"] == (
        "no PLE table: not a Qwen3.8-Flash-Next checkpoint; ple4patch changes nothing for it")


@pytest.mark.parametrize("edit", [b"def broken(:\n", None])
def test_a_modified_engine_file_blocks_an_fp8_table_too(fp8_ckpt, set_venv, pins_env, meminfo, edit):
    """The rule "an FP8 table needs no patch" holds for the file as the engine ships it: a
    `modified` ple_layer.py (not even Python, or a patched file edited by hand) may read nothing,
    so it blocks with reinstalling the engine as the change (no apply: FP8 needs no patch), and
    the engine line does not say it reads the layout."""
    if edit is None:
        assert commands.apply.run(set_venv).exit_code == 0
    target = kit.site_packages(set_venv) / TARGET_REL
    target.write_bytes(edit or target.read_bytes() + b"# edited by hand\n")
    r = run(fp8_ckpt, set_venv, meminfo, tp=4)
    pf = r.data["preflight"]
    assert (r.exit_code, pf["will_start"]) == (EXIT_CHECKPOINT, False) and r.message.startswith("WILL NOT START")
    files = [b for b in pf["blockers"] if b["area"] == "files"]
    assert [b["message"].split(":")[0] for b in files] == [TARGET_REL], pf["blockers"]
    assert "modified, not as the engine ships it" in files[0]["message"]
    assert files[0]["change"].startswith("reinstall the engine (") and "--force-reinstall" in files[0]["change"]
    assert "ple4patch apply" not in files[0]["change"]
    assert (r.data["engine"]["reads"], r.data["engine"]["can_read"]) == ([], False)
    assert "reads this layout" not in r.output and "reads: not known" in r.output
    nvfp4 = run(ckpt_factory.make(fp8_ckpt.parent / f"nv-{bool(edit)}", "nvfp4_rowpacked"), set_venv, meminfo, tp=4)
    assert nvfp4.exit_code == EXIT_CHECKPOINT and "reads this layout" not in nvfp4.output
    (b,) = [b for b in nvfp4.data["preflight"]["blockers"] if b["area"] == "files" and TARGET_REL in b["message"]]
    assert b["change"].startswith("reinstall the engine (") and f"then `ple4patch apply {set_venv}`" in b["change"]


# -- --serve-args read as the engine's argparse parser reads them ------------------------------------
# argparse (Python 3.11-3.13, allow_abbrev on, as vLLM's FlexibleArgumentParser keeps it): `-tp=4`
# and `-q=gguf` split at `=`, a one-letter option takes the rest of its word (`-qgguf`), `-tp4` is
# an unrecognized argument (`-tp` is three characters, and the engine defines no `-t`:
# vllm/engine/arg_utils.py at 1CatAI/1Cat-vLLM ae13773a0), and `--quant` abbreviates --quantization.

@pytest.mark.parametrize("serve_args, tp, settings", [
    ("m -tp=4", 4, {}),
    ("m --tensor-parallel-size=4", 4, {}),
    ("m --tensor_parallel_size 4", 4, {}),
    ("m -q=gguf", None, {"--quantization": "gguf"}),
    ("m -qgguf", None, {"--quantization": "gguf"}),
    ("m --quantization=gguf -tp 2", 2, {"--quantization": "gguf"}),
    ("m --load-format=gguf", None, {"--load-format": "gguf"}),
    ("m --quantization-config '{}' --model-impl vllm", None, {}),  # longer names, not abbreviations
])
def test_serve_args_take_attached_values(serve_args, tp, settings):
    o = preflight.parse_serve_args(serve_args)
    assert (o.tensor_parallel_size, o.settings, o.model) == (tp, settings, "m")


@pytest.mark.parametrize("serve_args, message", [
    ("m --quant gguf", "--quant: write --quantization in full; ple4patch does not guess abbreviations"),
    ("m --quant=gguf", "--quant: write --quantization in full"),
    ("m --tensor-parallel 4", "--tensor-parallel: write --tensor-parallel-size in full"),
    ("m --tensor_parallel 4", "--tensor-parallel: write --tensor-parallel-size in full"),
    ("m --load-f gguf", "--load-f: write --load-format in full"),
    ("--mod /models/x", "--mod: write --model in full"),
    ("m --conf serve.yaml", "--conf: write --config in full"),
    ("m -t 4", "-t: write -tp (or --tensor-parallel-size) in full"),
    ("m -tp4", "-tp4: vllm serve refuses it (argparse attaches a value only to a one-letter option): "
               "write -tp 4 or -tp=4"),
])
def test_serve_args_abbreviations_of_what_the_preflight_reads_are_usage_errors(serve_args, message):
    with pytest.raises(UsageError) as err:
        preflight.parse_serve_args(serve_args)
    assert str(err.value).startswith(f"--serve-args: {message}"), str(err.value)


def test_an_abbreviation_in_a_config_file_is_named_with_the_file(tmp_path, monkeypatch):
    pytest.importorskip("yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "serve.yaml").write_text("tensor-parallel: 4\n")
    with pytest.raises(UsageError, match=r"--tensor-parallel \(in --config serve.yaml\): write --tensor-parallel-size"):
        preflight.parse_serve_args("m --config serve.yaml")


@pytest.mark.parametrize("serve_args", ["-q=gguf", "-qgguf", "--quantization=gguf"])
def test_an_attached_gguf_quantization_blocks(ckpt, patched_set_venv, meminfo, serve_args):
    r = run(ckpt, patched_set_venv, meminfo, serve_args=f"vllm serve {ckpt} {serve_args} -tp=4")
    (b,) = r.data["preflight"]["blockers"]
    assert b["area"] == "environment" and "--quantization=gguf" in b["message"], b
    assert r.exit_code == EXIT_CHECKPOINT and r.data["memory"]["tp"] == 4


# -- launch prefixes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("serve_args, model, tp, environ", [
    # the module behind the `vllm` console script: its first word is the subcommand
    ("python -m vllm.entrypoints.cli.main serve /ckpt -tp 2", "/ckpt", 2, {}),
    ("/opt/venv/bin/python3.12 -m vllm.entrypoints.cli.main serve /ckpt", "/ckpt", None, {}),
    ("/usr/bin/env vllm serve /ckpt -tp 4", "/ckpt", 4, {}),
    ("env VLLM_PLE_CPU_OFFLOAD=1 A=b /opt/venv/bin/vllm serve /ckpt", "/ckpt", None,
     {"VLLM_PLE_CPU_OFFLOAD": "1", "A": "b"}),
    ("VLLM_QWEN4EXP_PLE_HOST_GIB=2 vllm serve /ckpt", "/ckpt", None, {"VLLM_QWEN4EXP_PLE_HOST_GIB": "2"}),
    ("env X=1 env Y=2 python -m vllm.entrypoints.openai.api_server --model /ckpt", "/ckpt", None,
     {"X": "1", "Y": "2"}),
])
def test_serve_args_launch_prefixes(serve_args, model, tp, environ):
    o = preflight.parse_serve_args(serve_args)
    assert (o.model, o.tensor_parallel_size, o.environ) == (model, tp, environ)


@pytest.mark.parametrize("serve_args, match", [
    ("python -m vllm.entrypoints.cli.main chat", "`vllm chat` does not start the server"),
    ("python -m vllm.entrypoints.cli.main", "`vllm` does not start the server"),
    ("env -i vllm serve /ckpt", "`env -i`: ple4patch reads only NAME=VALUE words after env; set the variables "
                                "in the environment ple4patch runs in instead"),
    ("vllm serve /a /b", "vllm serve takes one model, and this names two \\(/a and /b\\)"),
    ("/b -tp 2", None),
])
def test_serve_args_launch_forms_vllm_would_refuse(serve_args, match):
    if match is None:
        assert preflight.parse_serve_args(serve_args).model == "/b"
        return
    with pytest.raises(UsageError, match=match):
        preflight.parse_serve_args(serve_args)


# -- the model, as vllm serve takes it -----------------------------------------------------------------
# 1CatAI/1Cat-vLLM ae13773a0deebf583022613c4508e5072cedef91: vllm/entrypoints/openai/cli_args.py's
# make_arg_parser adds one optional positional `model_tag` (nargs="?"), which argparse also finds
# after options; vllm/utils/argparse_utils.py's FlexibleArgumentParser.parse_args moves the first
# `--model X` in front of the other words (so a positional besides it is a second one) and refuses
# --served-model-name when an option comes first, and _pull_args_from_config refuses a --config
# with no model after `serve` nor in the file; vllm/entrypoints/cli/serve.py's cmd serves the
# positional, else --model, else ModelConfig.model's default (vllm/config/model.py:
# "Qwen/Qwen3-0.6B"); vllm/entrypoints/openai/api_server.py's __main__ loads args.model only.

DEFAULT = "so it would load its default model Qwen/Qwen3-0.6B, not CHECKPOINT_DIR"


@pytest.mark.parametrize("serve_args, message", [
    ("vllm serve", f"`vllm serve` here names no model, {DEFAULT}: write `vllm serve CHECKPOINT_DIR [options]`"),
    ("vllm serve -tp 2 --enforce-eager", f"`vllm serve` here names no model, {DEFAULT}"),
    ("serve --kernel-config.ple_disk_cascade false", f"`vllm serve` here names no model, {DEFAULT}"),
    ("python -m vllm.entrypoints.cli.main serve -tp 2",
     f"`python -m vllm.entrypoints.cli.main serve` here names no model, {DEFAULT}"),
    ("python -m vllm.entrypoints.openai.api_server -tp 2",
     f"`python -m vllm.entrypoints.openai.api_server` here names no --model, {DEFAULT}: write "
     "`python -m vllm.entrypoints.openai.api_server --model CHECKPOINT_DIR [options]`"),
    ("python -m vllm.entrypoints.openai.api_server /ckpt",
     "python -m vllm.entrypoints.openai.api_server does not load a positional model (/ckpt): only vllm serve "
     "takes one, and this loads --model (else Qwen/Qwen3-0.6B): write --model /ckpt"),
    ("vllm serve --config port.yaml", "vllm serve refuses --config port.yaml with no model right after serve and "
     "none in the file (\"No model specified!\"): write `vllm serve CHECKPOINT_DIR --config port.yaml ...`"),
    ("vllm serve -tp 2 /ckpt --config port.yaml", "vllm serve refuses --config port.yaml with no model right after"),
    ("vllm serve -tp 2 --served-model-name qwen", "vllm serve refuses --served-model-name unless the model comes "
     "first (`model` should be provided as the first positional argument)"),
    ("vllm serve --port 8000", "ple4patch cannot tell whether 8000 is the value of --port or the model vllm serve "
     "loads (it does not know the engine's whole option list): put the model right after serve"),
])
def test_a_serve_command_line_that_does_not_load_its_model_is_refused(tmp_path, monkeypatch, serve_args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "port.yaml").write_text("port: 8001\n")
    with pytest.raises(UsageError) as err:
        preflight.parse_serve_args(serve_args)
    assert str(err.value).startswith(f"--serve-args: {message}"), str(err.value)


@pytest.mark.parametrize("serve_args, first, second", [
    ("vllm serve /a -tp 2 /b", "/a", "/b"),
    ("vllm serve -tp 2 /a /b", "/a", "/b"),
    ("vllm serve /a --max-model-len=4096 /b", "/a", "/b"),  # an attached value: argparse takes no more
    ("vllm serve /a --kernel-config.ple_disk_cascade false /b", "/a", "/b"),  # a dotted option takes one word
    ("vllm serve /a -q gguf --config port.yaml /b", "/a", "/b"),
])
def test_a_second_model_after_options_is_refused(tmp_path, monkeypatch, serve_args, first, second):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "port.yaml").write_text("port: 8001\n")
    with pytest.raises(UsageError) as err:
        preflight.parse_serve_args(serve_args)
    assert str(err.value) == (f"--serve-args: vllm serve takes one model, and this names two ({first} and {second}): "
                              f"vllm serve would refuse {second} as an unrecognized argument; give the one model the "
                              "server loads")


@pytest.mark.parametrize("serve_args", ["vllm serve /a --model /b", "/a --model=/b", "vllm serve -tp 2 --model /b /a"])
def test_a_positional_model_beside_model_is_a_second_model(serve_args):
    with pytest.raises(UsageError, match="puts --model's value first and would refuse /a as an unrecognized argument"):
        preflight.parse_serve_args(serve_args)


@pytest.mark.parametrize("serve_args, model", [
    ("vllm serve -tp 2 /ckpt", "/ckpt"),  # argparse finds the positional after options
    ("vllm serve --model /ckpt --model /b", "/ckpt"),  # the first --model is moved in front
    ("vllm serve --config model.yaml", "/models/in-file"),
    ("vllm serve --config model.yaml --model /ckpt", "/ckpt"),
    ("vllm serve -tp 2 /ckpt --config model.yaml", "/ckpt"),  # the positional wins over the file's
    ("vllm serve /ckpt --served-model-name qwen other --port 8000", "/ckpt"),
    ("python -m vllm.entrypoints.openai.api_server --config model.yaml --model /ckpt", "/ckpt"),
    ("-tp 2 /ckpt", "/ckpt"),
    ("-tp 2", None),  # options alone: the words after `vllm serve CHECKPOINT_DIR`
    ("--port 8000 --config port.yaml", None),
])
def test_the_model_vllm_serve_loads(tmp_path, monkeypatch, serve_args, model):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "port.yaml").write_text("port: 8001\n")
    (tmp_path / "model.yaml").write_text("model: /models/in-file\n")
    assert preflight.parse_serve_args(serve_args).model == model


def test_inspect_refuses_a_serve_line_without_the_checkpoint(ckpt, set_venv, pins_env):
    """The default model would start, not CHECKPOINT_DIR: a usage error (exit 2), also with --json."""
    for args in (["--serve-args", "vllm serve -tp 2"], ["--serve-args", f"vllm serve {ckpt} -tp 2 {ckpt}", "--json"]):
        res = CliRunner().invoke(main, ["inspect", str(ckpt), str(set_venv), *args])
        assert res.exit_code == 2, res.output
    assert json.loads(res.stdout)["error"]["kind"] == "usage"
    assert "names two" in json.loads(res.stdout)["error"]["message"]
    res = CliRunner().invoke(main, ["inspect", str(ckpt), str(set_venv), "--serve-args", "vllm serve -tp 2"])
    assert "Qwen/Qwen3-0.6B" in " ".join(res.output.split()) and "CHECKPOINT_DIR" in res.output


def test_the_cli_main_module_compares_its_model_and_env_settings_count(ckpt, tmp_path, patched_set_venv, meminfo):
    other = tmp_path / "another-model"
    other.mkdir()
    with pytest.raises(UsageError, match=f"names the model {other}, but CHECKPOINT_DIR is"):
        run(ckpt, patched_set_venv, meminfo, serve_args=f"python -m vllm.entrypoints.cli.main serve {other}")
    r = run(ckpt, patched_set_venv, meminfo, serve_args=f"env VLLM_PLE_CPU_OFFLOAD=1 vllm serve {ckpt}")
    (b,) = r.data["preflight"]["blockers"]
    assert b["area"] == "environment" and "VLLM_PLE_CPU_OFFLOAD=1" in b["message"]
    assert r.data["preflight"]["settings"] == {"VLLM_PLE_CPU_OFFLOAD": "1"}
    # the command line's variable wins over this process's environment, as env makes it
    r = run(ckpt, patched_set_venv, meminfo, environ={"VLLM_PLE_CPU_OFFLOAD": "1"},
            serve_args=f"VLLM_PLE_CPU_OFFLOAD=0 vllm serve {ckpt}")
    assert r.exit_code == EXIT_OK, blockers(r)


# -- what a checkpoint blocker's change names: an action, not the expected shape ---------------------

def test_a_checkpoint_blocker_names_an_action(tmp_path, set_venv, pins_env, meminfo):
    cfg = ckpt_factory.config(dtype="float8_e4m3fn")
    tensors = ckpt_factory.table_tensors(cfg, "fp8")
    (scale,) = [n for n in tensors if n.endswith("ngram_embedding.weight_scale")]
    del tensors[scale]
    root = ckpt_factory.write(tmp_path / "fp8-noscale", cfg, dict(tensors, **ckpt_factory.other_tensors()))
    r = run(root, set_venv, meminfo, tp=4)
    (b,) = r.data["preflight"]["blockers"]
    expected = r.data["problems"][0]["expected"]
    assert b["area"] == "checkpoint" and expected and b["change"] == (
        f"re-download the checkpoint file that should hold ngram_embedding.weight_scale (expected {expected})")
    assert f"change: {expected}" not in " ".join(r.output.split()) and "first: " + expected not in r.message
    text = " ".join(r.output.split())
    assert "change: re-download the checkpoint file that should hold ngram_embedding.weight_scale" in text


def test_a_config_problem_names_the_config_edit(tmp_path, patched_set_venv, meminfo):
    bad = ckpt_factory.make(tmp_path / "split", "nvfp4_split", dtype=None)
    r = run(bad, patched_set_venv, meminfo)
    (b,) = r.data["preflight"]["blockers"]
    assert b["change"] == 'add `"ple_embedding_dtype": "nvfp4_rowpacked"` to the text_config object of config.json', b


def test_a_bf16_table_names_the_checkpoint_to_use_first(tmp_path, set_venv, pins_env, meminfo):
    """No patch makes a BF16 table readable: the change named first (verdict and JSON) is the
    checkpoint to use, not `ple4patch apply`."""
    r = run(ckpt_factory.make(tmp_path / "bf16", "bf16"), set_venv, meminfo, tp=4)
    blockers_ = r.data["preflight"]["blockers"]
    assert blockers_[0]["area"] == "checkpoint" and blockers_[0]["change"] == "use the model's NVFP4 or FP8 checkpoint"
    assert r.message.endswith("; first: use the model's NVFP4 or FP8 checkpoint"), r.message
    assert any("ple4patch apply" in (b["change"] or "") for b in blockers_[1:])


def test_an_fp8_table_without_a_budget_is_placed_vram_first(fp8_ckpt, fair_share_venv, meminfo):
    """1Cat-vLLM's own FP8 loader (036318a0 and 15a8d185 ple_layer.py: `_resolve_host_budget` /
    `_device_spill_bytes`, auto_ple_host_budget_bytes from torch.cuda.mem_get_info, the fair share
    only a cap) keeps the rows that fit beside the weights and the KV cache in VRAM: without a
    budget the host figures are at most these, and a host without room for all of them is a
    warning with that caveat, not a blocker. With a budget set they are exact again."""
    # A host whose fair share takes every row, but not the power of two torch pins them in.
    r = preflight.run(fp8_ckpt, fair_share_venv, environ={}, meminfo_path=meminfo(available_kib=3, total_kib=1), tp=4)
    kit.validate(r.to_json())
    mem = r.data["memory"]
    assert mem["host_rows_per_rank"] == mem["rows_per_rank"] and mem["pinned_bytes_per_host"] > 3 * 1024, mem
    assert (mem["host_rows_upper_bound"], mem["fits"]) == (True, False)
    assert r.exit_code == EXIT_OK and r.data["preflight"]["blockers"] == [], r.data["preflight"]["blockers"]
    (finding,) = [f for f in r.data["preflight"]["findings"] if f["area"] == "memory"]
    assert finding["message"].startswith(f"up to {mem['pinned_bytes_per_host']:,} B") and not finding["blocks"]
    assert "VRAM first" in finding["message"]
    text = " ".join(r.output.split())
    assert f"up to {mem['host_rows_per_rank']:,} of {mem['rows_per_rank']:,} rows per rank in host memory" in text
    assert any(w["code"] == "memory" and "up to" in w["message"] for w in r.data["warnings"])
    # a budget the user sets is what the engine pins: exact, and a host without room blocks
    r = preflight.run(fp8_ckpt, fair_share_venv, environ={"VLLM_QWEN4EXP_PLE_HOST_GIB": "4"},
                      meminfo_path=meminfo(available_kib=1), tp=4)
    assert r.data["memory"]["host_rows_upper_bound"] is False
    assert [b["area"] for b in r.data["preflight"]["blockers"]] == ["memory"]
    assert "up to" not in r.data["preflight"]["blockers"][0]["message"]
    # the hybrid PLE mode sends the whole table to the host (capped): the figures are exact
    r = preflight.run(fp8_ckpt, fair_share_venv, environ={"VLLM_SM70_QWEN38_HYBRID_PLE": "1"}, meminfo_path=meminfo(),
                      tp=4)
    assert r.data["memory"]["host_rows_upper_bound"] is False


def test_an_nvfp4_table_keeps_its_exact_figures(ckpt, fair_share_venv, meminfo):
    r = preflight.run(ckpt, fair_share_venv, environ={}, meminfo_path=meminfo(), tp=4)
    assert r.data["memory"]["host_rows_upper_bound"] is False and "up to" not in r.output

"""End to end: a plain start-up of an NVFP4 checkpoint on the SM70 Qwen3.8 lane, policy then worker.

Front end: the start-up policy (the stand-in engine's runtime_defaults.py, shaped like 1CatAI/1Cat-vLLM
51c0f97201a70a644a80ac21d292a15eff0dc4e6's; tests/policy_harness.py fakes what it imports) resolves
the PLE placement with no PLE variable set. Worker: the placement it resolved (the defaults it set,
which the engine hands to the workers as typed config, here as the stand-in's environment, and the
cascade admission in KernelConfig) is in force while the patched ple_layer.py builds and loads the
table through the model-level weight path. Stock policy: the worker refuses (the disk-mmap default
moved the table out of the GPU workers). Patched policy: the NVFP4 table is built, pinned, and
looks up bit-exactly.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import harness as h  # noqa: E402
import policy_harness as ph  # noqa: E402
from test_e2e_nvfp4 import bits, build_loaded, engine_15a8, engine_dir, reference, standin_engine  # noqa: E402,F401 (fixtures)

from ple4patch.transform import patch_policy_source  # noqa: E402



def policy_text(patched: bool) -> str:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "fixtures/standin_engine/vllm/platforms/runtime_defaults.py"
    text = path.read_text()
    return patch_policy_source(text) if patched else text


def start_up(monkeypatch, patched: bool, environ=None):
    """The front end's policy for an NVFP4 config: (defaults it set, cascade admitted?)."""
    with monkeypatch.context() as mp:
        mod = ph.load_policy(policy_text(patched), mp, environ)
        cfg = ph.make_cfg("nvfp4_rowpacked")
        defaults = mod.apply_runtime_policy_defaults(cfg)
        admitted = mod._qwen4exp_ple_cascade_requested(cfg, defaults=ph.PolicyDefaults(cfg, environ or {}))
    return dict(defaults.set), admitted


def in_worker(monkeypatch, placement: dict, admitted: bool, engine):
    for name, value in placement.items():
        monkeypatch.setenv(name, value)
    with h.engine_config(ple_disk_cascade_active=admitted):
        return build_loaded(engine)


def test_stock_policy_defeats_the_patched_layer(monkeypatch, standin_engine):
    placement, admitted = start_up(monkeypatch, patched=False)
    assert placement.get("VLLM_PLE_CPU_OFFLOAD") == "1" and admitted
    with pytest.raises(RuntimeError, match="nvfp4_rowpacked"):
        in_worker(monkeypatch, placement, admitted, standin_engine)


def test_patched_policy_pins_the_table_in_the_worker(monkeypatch, standin_engine):
    placement, admitted = start_up(monkeypatch, patched=True)
    assert placement == {} and admitted is False
    model, table, _loaded, _tensors = in_worker(monkeypatch, placement, admitted, standin_engine)
    emb = model.ngram_embedding
    assert type(emb).__name__ == "Ple4NvFp4PinnedEmbedding"
    ids = torch.randint(0, emb.org_vocab_size, (6, h.Geometry().ngram_heads), generator=torch.Generator().manual_seed(5))
    out = emb(ids.to("cuda" if h.HAS_CUDA else "cpu"))
    assert torch.equal(bits(out), bits(reference(table, ids)))


def test_patched_policy_refuses_an_explicit_offload_before_any_worker(monkeypatch):
    with pytest.raises(ValueError, match=r"^ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but VLLM_PLE_CPU_OFFLOAD=1"):
        start_up(monkeypatch, patched=True, environ={"VLLM_PLE_CPU_OFFLOAD": "1"})


def test_under_the_stock_policy_an_admitted_cascade_is_refused_naming_the_option(monkeypatch, engine_15a8):
    """The half-patched case (a release whose policy file ple4patch did not patch, or a kill
    between the two replaces): the cascade the stock policy admitted reaches the worker, and the
    patched layer's one line names the kernel-config option, not a variable the user never set."""
    _placement, admitted = start_up(monkeypatch, patched=False)
    assert admitted
    with pytest.raises(RuntimeError) as err:
        in_worker(monkeypatch, {}, admitted, engine_15a8)
    line = str(err.value)
    assert "disk cascade" in line and "--kernel-config '{\"ple_disk_cascade\": false}'" in line and "\n" not in line


CASCADE_ON = '{"ple_disk_cascade": true}'


@pytest.mark.parametrize("argv, given", [
    (["/srv/engine/bin/vllm", "serve", "/models/q38", "--kernel-config", CASCADE_ON], "is set"),
    (["/srv/engine/bin/vllm", "serve", "/models/q38", "--kernel_config.ple_disk_cascade=true"],
     "given by --kernel-config.ple_disk_cascade"),
    (["/srv/engine/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py",
      "--model", "/models/q38", f"--kernel-config={CASCADE_ON}"], "is set"),
])
def test_patched_policy_refuses_the_cascade_forced_on_in_the_command_line(monkeypatch, argv, given):
    """`vllm serve ... --kernel-config '{"ple_disk_cascade": true}'`: the config cannot tell it from
    the default, but the command line of the process running the policy can; one line, before any
    worker, naming the option."""
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(ValueError) as err:
        start_up(monkeypatch, patched=True)
    line = str(err.value)
    assert line.startswith("ple_embedding_dtype='nvfp4_rowpacked' pins the PLE table in each GPU worker, but "
                           "--kernel-config ple_disk_cascade=true"), line
    assert given in line and "--kernel-config '{\"ple_disk_cascade\": false}'" in line and "\n" not in line


@pytest.mark.parametrize("argv", [
    ["/srv/engine/bin/vllm", "serve", "/models/q38", "--kernel-config", '{"ple_disk_cascade": false}'],
    ["/srv/engine/bin/vllm", "serve", "/models/q38", "--kernel-config", CASCADE_ON,
     "--kernel-config.ple_disk_cascade", "false"],  # the dotted form is merged last, and wins
    # a script that builds the engine in Python: its arguments are its own, not the engine's
    ["/home/me/bench.py", "--kernel-config", CASCADE_ON],
])
def test_patched_policy_pins_the_table_when_the_command_line_does_not_force_the_cascade(monkeypatch, argv):
    monkeypatch.setattr("sys.argv", argv)
    placement, admitted = start_up(monkeypatch, patched=True)
    assert placement == {} and admitted is False

"""ple4patch/kernels/nvfp4_loader.py on its own: injection rules, and importable with the stand-in vllm."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools import engine_files

SRC = Path(__file__).resolve().parents[2] / "ple4patch" / "kernels" / "nvfp4_loader.py"
PREFIXES = ("_ple4_", "ple4_", "Ple4")


def test_top_level_names_are_prefixed_and_only_definitions_run():
    tree = ast.parse(SRC.read_text(encoding="utf-8"))
    calls = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant):
                continue  # the docstring
            assert isinstance(node.value, ast.Call), f"line {node.lineno}: only the op registration runs"
            calls.append(ast.unparse(node.value.func))
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets]
        else:
            pytest.fail(f"line {node.lineno}: {type(node).__name__} at top level")
        for name in names:
            assert name.startswith(PREFIXES), f"line {node.lineno}: top-level name {name!r}"
    assert calls == ["direct_register_custom_op"]


def test_real_engine_files_gain_only_stdlib_imports():
    """Everything the loader imports from vllm is already imported by every known engine file;
    the imports transform adds only standard-library modules there."""
    import libcst as cst
    from libcst.codemod import CodemodContext

    from ple4patch.transform._common import injected_modules
    from ple4patch.transform.imports import AddInjectedImports

    rows = engine_files.shared_engines()
    if not rows:
        pytest.skip("../shared/engines is absent")
    for row in rows:
        text = row.data.decode("utf-8")
        out = AddInjectedImports(CodemodContext(), injected_modules()).transform_module(cst.parse_module(text)).code
        added = [line for line in out.splitlines() if line.startswith(("import ", "from "))]
        original = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
        new = sorted(set(added) - set(original))
        assert new == ["import functools", "import inspect", "import mmap", "import weakref"], (row.folder, new)


def test_package_module_imports_against_the_standin_vllm(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import harness as h

    h.standin_vllm()
    from ple4patch.kernels import nvfp4_loader as loader
    from vllm.transformers_utils.configs.qwen4_exp import Qwen4ExpTextConfig

    for value, expected in [
        ("nvfp4_rowpacked", True),
        ("torch.nvfp4_rowpacked", True),
        ("float8_e4m3fn", False),
        (None, False),
    ]:
        assert loader.ple4_nvfp4_requested(Qwen4ExpTextConfig(ple_embedding_dtype=value)) is expected
    assert loader.ple4_nvfp4_requested(Qwen4ExpTextConfig()) is False

    class Target:
        def __init__(self, config, quant_config=None):
            self.built = True

    loader.ple4_nvfp4_install(Target)
    guarded = Target.__init__
    assert loader.ple4_nvfp4_install(Target) is Target and Target.__init__ is guarded  # idempotent
    assert Target(Qwen4ExpTextConfig(ple_embedding_dtype="float8_e4m3fn")).built
    monkeypatch.setenv("VLLM_PLE_CPU_OFFLOAD", "1")
    with pytest.raises(RuntimeError, match="VLLM_PLE_CPU_OFFLOAD=0"):
        Target(Qwen4ExpTextConfig(ple_embedding_dtype="nvfp4_rowpacked"))
    assert Target(Qwen4ExpTextConfig(ple_embedding_dtype="float8_e4m3fn")).built  # untouched
    monkeypatch.delenv("VLLM_PLE_CPU_OFFLOAD")
    # Engine helpers are looked up in the module's globals (the engine file once injected).
    assert loader._ple4_engine_helper("ple_cascade_configured") is None
    monkeypatch.setattr(loader, "ple_cascade_configured", lambda: True, raising=False)
    with pytest.raises(RuntimeError, match="cascade") as err:
        loader.ple4_nvfp4_check_modes(None)
    assert "ple_disk_cascade" in str(err.value)  # the admitted cascade: the kernel-config option
    # A release whose ple_cascade_configured() reads VLLM_QWEN4EXP_PLE_DISK (Peuqui/1Cat-vLLM
    # 138059c8, vllm/models/qwen4_exp/common/ple.py): the line names the variable instead.
    monkeypatch.setattr(loader.envs, "VLLM_QWEN4EXP_PLE_DISK", True, raising=False)
    with pytest.raises(RuntimeError) as err:
        loader.ple4_nvfp4_check_modes(None)
    assert str(err.value) == (
        "ple_embedding_dtype='nvfp4_rowpacked' does not support the PLE disk cascade that "
        "VLLM_QWEN4EXP_PLE_DISK turns on: set VLLM_QWEN4EXP_PLE_DISK=0")

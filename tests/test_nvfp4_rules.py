"""nvfp4_gather.py obeys the injection rules, and its injected text works in a foreign module."""

import ast
import importlib.util
import os
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "ple4patch" / "kernels" / "nvfp4_gather.py"
ALLOWED_IMPORTS = {("import", "torch", None), ("import", "triton", None), ("import", "triton.language", "tl")}


def _body_after_imports(text):
    """The source after the module docstring and the leading import lines (what gets injected)."""
    tree = ast.parse(text)
    body = tree.body
    i = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else 0
    while i < len(body) and isinstance(body[i], (ast.Import, ast.ImportFrom)):
        i += 1
    lines = text.splitlines(keepends=True)
    return tree, body[:i], "".join(lines[body[i].lineno - 1 - len(body[i].decorator_list if hasattr(body[i], "decorator_list") else []) :])


def test_imports_are_only_torch_triton_tl():
    tree, head, _ = _body_after_imports(SRC.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            pytest.fail(f"line {node.lineno}: 'from ... import' is not allowed in the injected kernel")
        if isinstance(node, ast.Import):
            assert node in head, f"line {node.lineno}: imports must be the plain lines at the top"
            for a in node.names:
                found.add(("import", a.name, a.asname))
    assert found <= ALLOWED_IMPORTS, found - ALLOWED_IMPORTS


def test_top_level_names_are_prefixed_and_definitions_only():
    tree, head, _ = _body_after_imports(SRC.read_text())
    for node in tree.body:
        if node in head or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            assert len(names) == len(targets), f"line {node.lineno}: only plain name assignments"
        else:
            pytest.fail(f"line {node.lineno}: {type(node).__name__} at top level (definitions only)")
        for name in names:
            assert name.startswith(("_ple4_", "ple4_")), f"line {node.lineno}: top-level name {name!r}"


def test_injected_text_runs_in_an_engine_like_module(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    _, _, injected = _body_after_imports(SRC.read_text())
    # The engine's ple_layer.py has these names already (vllm.triton_utils re-exports triton and tl).
    host = "import torch\nfrom triton import language as tl\nimport triton\n\nEXISTING = 1\n\n" + injected
    path = tmp_path / "fake_ple_layer.py"
    path.write_text(host)
    spec = importlib.util.spec_from_file_location("fake_ple_layer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    from ple4patch.kernels import nvfp4

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    table = nvfp4.full_code_space_table(160)
    ids = torch.arange(table.shape[0], device=dev)
    out = mod.ple4_nvfp4_gather(table.to(dev), ids, torch.tensor([0.5], device=dev), 160, torch.float16)
    ref = nvfp4.dequant_reference(table, 0.5, 160)
    assert torch.equal(out.cpu().view(torch.int16), ref.view(torch.int16))

"""The module map of docs/architecture.md holds: layers import downward only, no cycles,
`fsio` (the lowest writing layer) knows nothing of `state`, and `tools/` never imports the
tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kit

PKG = kit.REPO / "ple4patch"
DOC = kit.REPO / "docs" / "architecture.md"


def _module_of(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "/".join(parts)


def _imports(path: Path) -> set[str]:
    """The ple4patch modules `path` imports (relative imports, resolved; `from . import x` as x)."""
    here = _module_of(path).split("/") if path.name != "__init__.py" else _module_of(path).split("/") + ["_"]
    here = [p for p in here if p]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level]
            if node.module:
                out.add("/".join(base + node.module.split(".")))
            else:
                out.update("/".join(base + [a.name]) for a in node.names)
    known = {_module_of(p) for p in PKG.rglob("*.py")}
    return {m for m in out if m in known}


def _graph() -> dict[str, set[str]]:
    return {_module_of(p): _imports(p) for p in PKG.rglob("*.py")}


def _layers(prefix: str = "") -> dict[str, int]:
    """module -> layer number, from the doc's layer table (`| 5 writing | `write` |`); with
    `prefix` "c", from the table of the ckpt package's own layers (`| c2 reading | ... |`)."""
    out = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*" + prefix + r"(\d+) [^|]*\|(.*)\|\s*$", line)
        if m:
            for name in re.findall(r"`([a-z_/]+)`", m.group(2)):
                out[name] = int(m.group(1))
    return out


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack + [node, dep]))
            if dep not in state:
                visit(dep, stack + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def _upward(layers: dict[str, int]) -> list[str]:
    graph = _graph()
    return [
        f"{mod} (layer {layers[mod]}) imports {dep} (layer {layers[dep]})"
        for mod, deps in graph.items() if mod in layers
        for dep in deps if dep in layers and layers[dep] >= layers[mod]
    ]


def test_ckpt_layers_import_downward_only():
    layers = _layers("c")
    ckpt = {m for m in _graph() if m.startswith("ckpt/")}
    assert ckpt == set(layers), "every ckpt module has a row in the ckpt layer table"
    assert _upward(layers) == []


def test_layers_import_downward_only():
    layers = _layers()
    assert {"cli", "commands/apply", "write", "plan", "state", "fsio", "paths"} <= set(layers)
    graph = _graph()
    upward = [
        f"{mod} (layer {layers[mod]}) imports {dep} (layer {layers[dep]})"
        for mod, deps in graph.items() if mod in layers
        for dep in deps if dep in layers and layers[dep] >= layers[mod]
    ]
    assert upward == []


def test_fsio_does_not_import_state():
    assert "state" not in _imports(PKG / "fsio.py")


def test_tools_do_not_import_the_tests():
    for path in sorted((kit.REPO / "tools").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert '"tests"' not in text.replace('"tests" / "fixtures"', "").replace('"tests" / "data"', ""), f"{path.name} puts tests/ on sys.path"
        tree = ast.parse(text)
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not names & {"kit", "enginekit", "reliakit", "conftest"}, path.name

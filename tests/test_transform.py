"""The libcst transforms: goldens per transformer, every anchor, and the real engine files.

Goldens: tests/fixtures/transform/mini.before.py through one transformer gives
<name>.after.py (the injecting transformers use the small fake modules in
tests/fixtures/transform/injected/ so the goldens do not move with the real loader).
PLE4_REGEN_GOLDEN=1 rewrites the .after.py files (review the diff before committing).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

import libcst as cst
from libcst.codemod import CodemodContext

import kit
from ple4patch.errors import TransformError
from ple4patch.sentinel import find_patch_id, sentinel_line
from ple4patch.transform import patch_source
from ple4patch.transform._common import BLOCK_BEGIN, BLOCK_END, injected_modules, split_injected
from ple4patch.transform.dispatch import NgramEmbeddingDispatch
from ple4patch.transform.imports import AddInjectedImports
from ple4patch.transform.inject import InjectBlock
from ple4patch.transform.load_weights import LoadWeightsDispatch

FIXTURES = Path(__file__).parent / "fixtures" / "transform"
MINI = (FIXTURES / "mini.before.py").read_text(encoding="utf-8")
OFFLOAD_IMPORT = "from vllm.model_executor.layers.ple_offload_layer import PleOffloadLayer\n"


def fake_injected():
    return tuple(
        split_injected(name, (FIXTURES / "injected" / f"{name}.py").read_text(encoding="utf-8"))
        for name in ("nvfp4_gather", "nvfp4_loader")
    )


def run(transform_cls, source: str, *args) -> str:
    tree = cst.parse_module(source)
    return transform_cls(CodemodContext(), *args).transform_module(tree).code


TRANSFORMS = {
    "imports": lambda src: run(AddInjectedImports, src, fake_injected()),
    "inject": lambda src: run(InjectBlock, src, fake_injected()),
    "dispatch": lambda src: run(NgramEmbeddingDispatch, src),
    "load_weights": lambda src: run(LoadWeightsDispatch, src),
}


def anchor_of(excinfo) -> str:
    return excinfo.value.anchor


# -- goldens ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_golden(name):
    out = TRANSFORMS[name](MINI)
    golden = FIXTURES / f"{name}.after.py"
    if os.environ.get("PLE4_REGEN_GOLDEN") == "1":
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")
    compile(out, golden.name, "exec")
    assert out != MINI


def test_goldens_compose_into_a_compiling_patch():
    src = MINI
    for name in ("imports", "inject", "dispatch", "load_weights"):
        src = TRANSFORMS[name](src)
    compile(src, "mini", "exec")
    assert src.count(sentinel_line()) == 1


def test_imports_transform_is_idempotent_and_respects_equivalent_bindings():
    once = TRANSFORMS["imports"](MINI)
    assert TRANSFORMS["imports"](once) == once
    # triton/tl come from vllm.triton_utils in the target: the same objects, nothing added.
    assert "\nimport triton\n" not in once and "import triton.language as tl" not in once
    added = once[len(MINI.split("\n\nlogger")[0]) :]
    assert "import functools\n" in added
    # torch and direct_register_custom_op were imported already; math too.
    assert once.count("import torch\n") == 1 and once.count("import math\n") == 1
    assert once.count("direct_register_custom_op\n") == 1


def test_imports_adds_triton_when_the_target_lacks_it():
    src = MINI.replace("from vllm.triton_utils import tl, triton\n", "")
    out = TRANSFORMS["imports"](src)
    assert "import triton\nimport triton.language as tl\n" in out


# -- anchors: absence and duplication name the anchor --------------------------------------


def test_imports_anchor_missing():
    src = '"""doc"""\n\nx = 1\nimport os\n'
    with pytest.raises(TransformError) as e:
        TRANSFORMS["imports"](src)
    assert anchor_of(e) == "module imports"


def test_imports_conflicting_binding_is_refused():
    src = MINI.replace("import math\n", "import math\nfrom numpy import math as functools\n")
    with pytest.raises(TransformError) as e:
        TRANSFORMS["imports"](src)
    assert anchor_of(e) == "import functools"
    src = MINI.replace("logger = None\n", "logger = None\nfunctools = None\n")
    with pytest.raises(TransformError) as e:
        TRANSFORMS["imports"](src)
    assert anchor_of(e) == "import functools"


def test_injected_module_rules():
    with pytest.raises(TransformError, match="__future__"):
        split_injected("x", '"""d"""\nfrom __future__ import annotations\nimport os\n\nx = 1\n')
    with pytest.raises(TransformError, match="after the first definition"):
        split_injected("x", "import os\n\nx = 1\nimport sys\n")
    mod = split_injected("x", '"""d"""\nimport os\n\n\n# c\nx = 1\n')
    assert mod.body == "# c\nx = 1\n" and mod.defines == ("x",)


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda s: s.replace("__all__ = [", "_all = ["), "__all__"),
        (lambda s: s + '\n__all__ = ["x"]\n', "__all__"),
        (lambda s: s.replace("class Qwen4ExpNGramEmbedding(", "class Other("), "class Qwen4ExpNGramEmbedding"),
        (lambda s: s + "\n\nclass Qwen4ExpNGramEmbedding:\n    pass\n", "class Qwen4ExpNGramEmbedding"),
        (lambda s: s.replace("logger = None\n", "logger = None\n_ple4_registry = {}\n"), "injected names"),
    ],
    ids=["all-missing", "all-twice", "class-missing", "class-twice", "name-clash"],
)
def test_inject_anchors(mutation, expected):
    with pytest.raises(TransformError) as e:
        TRANSFORMS["inject"](mutation(MINI))
    assert anchor_of(e) == expected


def test_inject_refuses_all_before_the_class():
    head, tail = MINI.split("class Qwen4ExpNGramEmbedding", 1)
    cls_text = "class Qwen4ExpNGramEmbedding" + tail.split("\n\n\ndef qwen4_exp_op")[0]
    src = MINI.replace(cls_text, "") + "\n\n" + cls_text + "\n"
    with pytest.raises(TransformError) as e:
        TRANSFORMS["inject"](src)
    assert anchor_of(e) == "__all__"


DISPATCH = "Qwen4ExpNGramEmbedding.__init__ ngram_embedding dispatch"
DISPATCH_LOCALS = "Qwen4ExpNGramEmbedding.__init__ locals"


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda s: s.replace("class Qwen4ExpNGramEmbedding(", "class Other("), "class Qwen4ExpNGramEmbedding"),
        (lambda s: s.replace("def __init__(", "def setup("), DISPATCH),
        (lambda s: s.replace("self.ngram_embedding =", "self.table ="), DISPATCH),
        (
            lambda s: s.replace(
                "        self.ready = True\n",
                "        if config.extra:\n            self.ngram_embedding = 1\n        self.ready = True\n",
            ),
            DISPATCH,
        ),
        (lambda s: s.replace("        embedding_prefix = f", "        prefix_text = f"), DISPATCH_LOCALS),
        (lambda s: s.replace("        quant_config=None,\n", ""), DISPATCH_LOCALS),
        (lambda s: s.replace("self.head_dim = ", "head_dim = "), DISPATCH_LOCALS),
    ],
    ids=["class-missing", "init-missing", "chain-missing", "chain-twice", "local-missing", "param-missing", "head-dim"],
)
def test_dispatch_anchors(mutation, expected):
    with pytest.raises(TransformError) as e:
        TRANSFORMS["dispatch"](mutation(MINI))
    assert anchor_of(e) == expected


def test_dispatch_refuses_a_second_application():
    once = TRANSFORMS["dispatch"](MINI)
    with pytest.raises(TransformError) as e:
        TRANSFORMS["dispatch"](once)
    assert anchor_of(e) == DISPATCH


LOAD = "Qwen4ExpNGramEmbedding.load_weights"


@pytest.mark.parametrize(
    "mutation",
    [
        lambda s: s.replace("def load_weights(", "def load_all("),
        lambda s: s.replace("        self.ready = True\n", "        self.ready = True\n\n    def load_weights(self, w):\n        pass\n"),
        lambda s: s.replace("        self.ready = True\n", "        self.ready = True\n\n    def _ple4_stock_load_weights(self, w):\n        pass\n"),
        lambda s: s.replace("    def load_weights(", "    @staticmethod\n    def load_weights("),
        lambda s: s.replace("def load_weights(self, weights:", "def load_weights(self, *, weights:"),
    ],
    ids=["missing", "twice", "already-renamed", "decorated", "signature"],
)
def test_load_weights_anchors(mutation):
    with pytest.raises(TransformError) as e:
        TRANSFORMS["load_weights"](mutation(MINI))
    assert anchor_of(e) == LOAD


def test_patch_source_refuses_patched_and_broken_input():
    with pytest.raises(TransformError) as e:
        patch_source(MINI + "\n" + sentinel_line() + "\n")
    assert anchor_of(e) == "sentinel"
    with pytest.raises(TransformError) as e:
        patch_source(MINI + "\n" + BLOCK_BEGIN + "\n")
    assert anchor_of(e) == "sentinel"
    with pytest.raises(TransformError) as e:
        patch_source("def broken(:\n")
    assert anchor_of(e) == "module"
    # A later anchor fails: no output, and the error names that anchor (MINI lacks the engine's
    # PLE offload layer, a facility the real loader needs: see test_transform_shapes.py).
    hosting = MINI.replace("import torch\n", "import torch\n\n" + OFFLOAD_IMPORT, 1)
    with pytest.raises(TransformError) as e:
        patch_source(hosting.replace("__all__ = [", "_all = ["))
    assert anchor_of(e) == "__all__"


# -- the real engine files and the stand-in ---------------------------------------------------


def _only_expected_changes(original: str, patched: str) -> None:
    """Every original line survives in order, except the dispatch's first `if`, now an `elif`."""
    a, b = original.splitlines(keepends=True), patched.splitlines(keepends=True)
    removed = []
    for op, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            removed.extend(a[i1:i2])
    assert len(removed) == 1, removed
    line = removed[0]
    assert line.lstrip().startswith("if ")
    assert line.replace("if ", "elif ", 1) in b


def _check_patched(original: str) -> str:
    patched = patch_source(original)
    compile(patched, "ple_layer.py", "exec")
    assert len(re.findall("^" + re.escape(sentinel_line()) + "$", patched, re.M)) == 1
    assert find_patch_id(patched) is not None
    assert patch_source(original) == patched  # deterministic
    with pytest.raises(TransformError):
        patch_source(patched)  # patching twice is refused
    for mod in injected_modules():  # exactly what ple4patch.kernels holds (and is tested)
        assert mod.body in patched
    assert patched.index(BLOCK_BEGIN) < patched.index(BLOCK_END) < patched.index("\n__all__ = [")
    _only_expected_changes(original, patched)
    return patched


def test_real_engine_files(shared_engine):
    _check_patched(shared_engine.data.decode("utf-8"))


def test_standin_engine_file():
    path = kit.standin_file()
    assert path is not None, "tests/fixtures/standin_engine is missing its ple_layer.py"
    patched = _check_patched(path.read_text(encoding="utf-8"))
    assert "\nimport triton\nimport triton.language as tl\n" in patched  # it lacks them


@pytest.mark.parametrize("binding", [
    "if TYPE_CHECKING:\n    ple4_nvfp4_gather = None\n",
    "try:\n    from x import ple4_nvfp4_gather\nexcept ImportError:\n    pass\n",
    "try:\n    pass\nexcept ImportError:\n    def ple4_nvfp4_gather():\n        pass\n",
    "if a:\n    pass\nelif b:\n    pass\nelse:\n    class ple4_nvfp4_gather:\n        pass\n",
    "with x:\n    ple4_nvfp4_gather = 1\n",
])
def test_an_injected_name_bound_inside_a_top_level_block_is_a_clash(binding):
    """A target that binds an injected name at module level, even inside an if/try/with block,
    is patched or foreign: refused, not shadowed."""
    from ple4patch.transform._common import module_level_names

    tree = cst.parse_module(binding + "def f():\n    ple4_local = 1\n")
    names = module_level_names(tree)
    assert "ple4_nvfp4_gather" in names and "ple4_local" not in names

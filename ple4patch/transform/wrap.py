"""Change 3, earlier engine shape: ``self.ngram_embedding = VocabParallelEmbedding(...)`` with no
dispatch in ``Qwen4ExpNGramEmbedding.__init__``.

Some versions build the table with one plain assignment, e.g. 1Cat-vLLM as published by the
fork Leonccaa/1Cat-vLLM at commit 12f2ad431694dc5786bb42c106d04026a9178e24
(tests/data/engines/fork-leonccaa-12f2ad43). There the patch wraps that statement:
``if ple4_nvfp4_requested(config): <NVFP4 table> else: <the original statement>``. The NVFP4
branch takes the table size, head dim, params dtype, padding and prefix from the original call's
own arguments, so it builds the same rows under the same layer name.

The assigned table may also be ``PLEVocabParallelEmbedding`` imported from ``..common.ple``, as
in D-G-Dimitrov/vllm at commit 337d3f5ddc8a5b85de8907adfe49c9d9e685703a
(vllm/models/qwen4_exp/nvidia/ple_layer.py, tests/data/engines/fork-d-g-dimitrov-337d3f5d).
Its vllm/models/qwen4_exp/common/ple.py is not in the public index; every public copy of that
file read (vllm-project/vllm 1a3108917e623445d7504c9aecfef3001b5ba287, lesj0610/vllm
b6defaa7fd8e3edd2f88d3d8fd69faccd63789e9, suzuri-lollipop/vllm
bd950f30e0555ac356bb429c3422d0cd168e1460, opengfx1030/vllm-rdna
fc449d69695ed2fb1046af4d0c6f45169981f553) defines it as a subclass of ``VocabParallelEmbedding``
that changes only how the stock table is filled: a ``weight_loader(param, loaded_weight,
checkpoint_start=None)`` copying one checkpoint row shard into this rank's rows (and, in some, a
quant-method shard sink or an opt-in host-resident ``weight``). That ple_layer.py uses nothing
else of it: the ``VocabParallelEmbedding`` constructor and that ``weight_loader``, from its stock
``load_weights``. The NVFP4 branch never builds the subclass: it builds the injected table
(itself a ``VocabParallelEmbedding``) and the patched ``load_weights`` loads its shards without
that ``weight_loader``; the original statement runs unchanged for any other config. So the wrap
is the same for either callee.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand

from ..errors import TransformError
from ._common import NGRAM_CLASS, import_bindings, is_import_line, ngram_init, one

ANCHOR = f"{NGRAM_CLASS}.__init__ ngram_embedding assignment"
PARAMS = ("config", "quant_config")
CALLEE = "VocabParallelEmbedding"
# Subclasses of CALLEE the wrap accepts -> the modules it must be imported from (see above).
SUBCLASS_CALLEES = {
    "PLEVocabParallelEmbedding": ("..common.ple", "vllm.models.qwen4_exp.common.ple"),
}
KEYWORDS = ("params_dtype", "padding_size", "prefix")  # of the original call, reused as they are

BRANCH = """\
if ple4_nvfp4_requested(config):
    # ple4patch: the NVFP4 row-packed PLE table (pinned host memory, Triton gather).
    self.ngram_embedding = ple4_nvfp4_build_embedding(
        config,
        {num_embeddings},
        {embedding_dim},
        params_dtype={params_dtype},
        padding_size={padding_size},
        prefix={prefix},
        quant_config=quant_config,
    )
else:
    pass
"""

SELF_NGRAM = m.AssignTarget(target=m.Attribute(value=m.Name("self"), attr=m.Name("ngram_embedding")))
_PLAIN_ASSIGN = m.SimpleStatementLine(body=[m.Assign(targets=[SELF_NGRAM], value=m.Call())])


def _callee_error(tree: cst.Module, func: cst.BaseExpression) -> str | None:
    """Why ``func`` is not a table class the wrap accepts (None when it is)."""
    if isinstance(func, cst.Name) and func.value == CALLEE:
        return None
    accepted = " or ".join(
        [f"{CALLEE}(...)"] + [f"{name}(...) of {sources[0]}" for name, sources in SUBCLASS_CALLEES.items()]
    )
    what = f"self.ngram_embedding is built by something else than {accepted}"
    if not (isinstance(func, cst.Name) and func.value in SUBCLASS_CALLEES):
        return what
    sources = SUBCLASS_CALLEES[func.value]
    bound = [
        source
        for stmt in tree.body
        if is_import_line(stmt)
        for name, source in import_bindings(stmt)  # type: ignore[arg-type]
        if name == func.value
    ]
    if bound and all(source in {f"{module}.{func.value}" for module in sources} for source in bound):
        return None
    where = f"bound to {bound[-1]}" if bound else "not imported at the top of the file"
    return f"{what} ({func.value} is {where})"


def has_plain_assignment(init: cst.FunctionDef) -> bool:
    """Whether ``__init__`` builds the table by one top-level assignment (this shape)."""
    body = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
    return any(m.matches(s, _PLAIN_ASSIGN) for s in body)


class NgramEmbeddingWrap(CodemodCommand):
    """Wrap the single top-level ``self.ngram_embedding = VocabParallelEmbedding(...)`` of
    ``Qwen4ExpNGramEmbedding.__init__`` in ``if ple4_nvfp4_requested(config): ... else: ...``:
    with ``ple_embedding_dtype: "nvfp4_rowpacked"`` the NVFP4 table is built instead; for any
    other config the original statement runs exactly as before.

    Anchors: one top-level class, one ``__init__`` with parameters ``config`` and
    ``quant_config``, exactly one top-level statement assigning ``self.ngram_embedding`` (a call
    of ``VocabParallelEmbedding``, or of ``PLEVocabParallelEmbedding`` imported from
    ``..common.ple``, with two positional arguments and the keywords ``params_dtype``,
    ``padding_size`` and ``prefix``), and no other statement of ``__init__`` that assigns
    ``self.ngram_embedding``.
    """

    DESCRIPTION = "Build the NVFP4 PLE table in place of a plain VocabParallelEmbedding."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        site = ngram_init(tree, ANCHOR)
        init = site.init
        if m.findall(init, m.Name("ple4_nvfp4_requested")):
            raise TransformError(ANCHOR, "__init__ already builds the NVFP4 table")
        stmts = site.statements
        assigns = [i for i, s in enumerate(stmts) if m.matches(s, _PLAIN_ASSIGN)]
        index = one(assigns, ANCHOR, "top-level 'self.ngram_embedding = VocabParallelEmbedding(...)' of __init__")
        others = [s for i, s in enumerate(stmts) if i != index and m.findall(s, SELF_NGRAM)]
        if others:
            raise TransformError(ANCHOR, "self.ngram_embedding is also assigned elsewhere in __init__")

        params = {p.name.value for p in (*init.params.params, *init.params.kwonly_params)}
        missing = [p for p in PARAMS if p not in params]
        if missing:
            raise TransformError(ANCHOR, f"__init__ has no parameter {', '.join(missing)}")

        stmt = stmts[index]
        call = stmt.body[0].value  # type: ignore[union-attr]
        wrong_callee = _callee_error(tree, call.func)
        if wrong_callee is not None:
            raise TransformError(ANCHOR, wrong_callee)
        callee = call.func.value  # type: ignore[attr-defined]
        positional = [a for a in call.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        lacking = [k for k in KEYWORDS if k not in keywords]
        if len(positional) != 2 or lacking:
            raise TransformError(
                ANCHOR,
                f"expected {callee}(num_embeddings, embedding_dim, "
                + ", ".join(f"{k}=..." for k in KEYWORDS)
                + ")"
                + (f"; missing {', '.join(lacking)}" if lacking else ""),
            )
        code = tree.code_for_node
        text = BRANCH.format(
            num_embeddings=code(positional[0].value),
            embedding_dim=code(positional[1].value),
            **{k: code(keywords[k]) for k in KEYWORDS},
        )
        branch = cst.parse_statement(text, config=tree.config_for_parsing)
        assert isinstance(branch, cst.If) and isinstance(branch.orelse, cst.Else)
        original = stmt.with_changes(leading_lines=())
        orelse = branch.orelse.with_changes(body=branch.orelse.body.with_changes(body=[original]))
        stmts[index] = branch.with_changes(leading_lines=stmt.leading_lines, orelse=orelse)

        return site.with_statements(tree, stmts)

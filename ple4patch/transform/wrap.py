"""Change 3, earlier engine shape: ``self.ngram_embedding = VocabParallelEmbedding(...)`` with no
dispatch in ``Qwen4ExpNGramEmbedding.__init__``.

Some versions build the table with one plain assignment, e.g. 1Cat-vLLM as published by the
fork Leonccaa/1Cat-vLLM at commit 12f2ad431694dc5786bb42c106d04026a9178e24
(tests/data/engines/fork-leonccaa-12f2ad43). There the patch wraps that statement:
``if ple4_nvfp4_requested(config): <NVFP4 table> else: <the original statement>``. The NVFP4
branch takes the table size, head dim, params dtype, padding and prefix from the original call's
own arguments, so it builds the same rows under the same layer name.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand

from ..errors import TransformError
from ._common import NGRAM_CLASS, ngram_init, one

ANCHOR = f"{NGRAM_CLASS}.__init__ ngram_embedding assignment"
PARAMS = ("config", "quant_config")
CALLEE = "VocabParallelEmbedding"
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
    of ``VocabParallelEmbedding`` with two positional arguments and the keywords
    ``params_dtype``, ``padding_size`` and ``prefix``), and no other statement of ``__init__``
    that assigns ``self.ngram_embedding``.
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
        if not (isinstance(call.func, cst.Name) and call.func.value == CALLEE):
            raise TransformError(ANCHOR, f"self.ngram_embedding is built by something else than {CALLEE}(...)")
        positional = [a for a in call.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        lacking = [k for k in KEYWORDS if k not in keywords]
        if len(positional) != 2 or lacking:
            raise TransformError(
                ANCHOR,
                f"expected {CALLEE}(num_embeddings, embedding_dim, "
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

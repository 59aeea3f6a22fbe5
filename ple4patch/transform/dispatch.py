"""Change 3: the ``ple_embedding_dtype`` dispatch in ``Qwen4ExpNGramEmbedding.__init__``."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodCommand

from ..errors import TransformError
from ._common import NGRAM_CLASS, ngram_init, one

ANCHOR = f"{NGRAM_CLASS}.__init__ ngram_embedding dispatch"
LOCALS_ANCHOR = f"{NGRAM_CLASS}.__init__ locals"

# Parameters and locals of __init__ the new branch reads (all three known releases have them).
PARAMS = ("config", "params_dtype", "quant_config")
LOCALS = ("padded_vocab_size", "divisor", "embedding_prefix")

BRANCH = """\
if ple4_nvfp4_requested(config):
    # ple4patch: the NVFP4 row-packed PLE table (pinned host memory, Triton gather).
    self.ngram_embedding = ple4_nvfp4_build_embedding(
        config,
        padded_vocab_size,
        self.head_dim,
        params_dtype=params_dtype,
        padding_size=divisor,
        prefix=embedding_prefix,
        quant_config=quant_config,
    )
"""

_SELF_NGRAM = m.AssignTarget(target=m.Attribute(value=m.Name("self"), attr=m.Name("ngram_embedding")))
_SELF_HEAD_DIM = m.AssignTarget(target=m.Attribute(value=m.Name("self"), attr=m.Name("head_dim")))


class NgramEmbeddingDispatch(CodemodCommand):
    """Put a first branch in front of the if/elif chain of ``Qwen4ExpNGramEmbedding.__init__``
    that builds ``self.ngram_embedding``: with ``ple_embedding_dtype: "nvfp4_rowpacked"`` it
    builds the NVFP4 table; for any other config the chain runs exactly as before.

    Anchors: one top-level class, one ``__init__``, exactly one top-level ``if`` statement of
    its body that assigns ``self.ngram_embedding``, and the locals the branch reads assigned
    before it.
    """

    DESCRIPTION = "Dispatch ple_embedding_dtype 'nvfp4_rowpacked' to the NVFP4 PLE table."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        site = ngram_init(tree, ANCHOR)
        init = site.init
        stmts = site.statements
        chains = [
            i for i, s in enumerate(stmts) if isinstance(s, cst.If) and m.findall(s, _SELF_NGRAM)
        ]
        chain_index = one(chains, ANCHOR, "top-level 'if' of __init__ that assigns self.ngram_embedding")
        if m.findall(init, m.Name("ple4_nvfp4_requested")):
            raise TransformError(ANCHOR, "the dispatch already has the NVFP4 branch")

        params = {p.name.value for p in (*init.params.params, *init.params.kwonly_params)}
        assigned = {
            n.value
            for s in stmts[:chain_index]
            for t in m.findall(s, m.AssignTarget())
            for n in m.findall(t, m.Name())
        }
        missing = [p for p in PARAMS if p not in params] + [v for v in LOCALS if v not in assigned]
        if not any(m.findall(s, _SELF_HEAD_DIM) for s in stmts[:chain_index]):
            missing.append("self.head_dim")
        if missing:
            raise TransformError(
                LOCALS_ANCHOR,
                f"{', '.join(missing)} not defined before the ngram_embedding dispatch",
            )

        chain = stmts[chain_index]
        assert isinstance(chain, cst.If)
        branch = cst.parse_statement(BRANCH, config=tree.config_for_parsing)
        assert isinstance(branch, cst.If)
        stmts[chain_index] = branch.with_changes(
            leading_lines=chain.leading_lines,
            orelse=chain.with_changes(leading_lines=()),
        )
        return site.with_statements(tree, stmts)

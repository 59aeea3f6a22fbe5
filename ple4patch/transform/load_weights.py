"""Change 4: shard loading in ``Qwen4ExpNGramEmbedding.load_weights``."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodCommand

from ..errors import TransformError
from ._common import NGRAM_CLASS, class_methods, find_class, one

ANCHOR = f"{NGRAM_CLASS}.load_weights"
STOCK_NAME = "_ple4_stock_load_weights"

METHOD = '''\
def load_weights(self, {weights}):
    """Load the NVFP4 row-packed PLE table (ple4patch), or else the stock way."""
    if ple4_nvfp4_active(self):
        return ple4_nvfp4_load_weights(self, {weights}, self.{stock})
    return self.{stock}({weights})
'''


class LoadWeightsDispatch(CodemodCommand):
    """Rename the stock ``load_weights`` to ``_ple4_stock_load_weights`` and put a dispatching
    ``load_weights`` (same signature) in front of it: an embedding built with the NVFP4 table
    loads through ``ple4_nvfp4_load_weights`` (which hands every non-table weight to the stock
    method); any other embedding calls the stock method unchanged.

    Anchors: one top-level class with exactly one undecorated ``load_weights(self, weights)``
    and no ``_ple4_stock_load_weights`` yet.
    """

    DESCRIPTION = "Load NVFP4 PLE shards in Qwen4ExpNGramEmbedding.load_weights."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        class_index, cls = find_class(tree)
        index, stock = one(class_methods(cls, "load_weights"), ANCHOR, f"method {ANCHOR}")
        if class_methods(cls, STOCK_NAME):
            raise TransformError(ANCHOR, f"{NGRAM_CLASS}.{STOCK_NAME} already exists")
        if stock.decorators:
            raise TransformError(ANCHOR, "load_weights is decorated; expected a plain method")
        params = stock.params
        if (
            len(params.params) != 2
            or params.posonly_params
            or params.kwonly_params
            or not isinstance(params.star_arg, cst.MaybeSentinel)
            or params.star_kwarg is not None
        ):
            raise TransformError(ANCHOR, "expected the signature load_weights(self, weights)")
        weights = params.params[1].name.value
        new = cst.parse_statement(
            METHOD.format(weights=weights, stock=STOCK_NAME), config=tree.config_for_parsing
        )
        assert isinstance(new, cst.FunctionDef)
        new = new.with_changes(
            params=params,
            returns=stock.returns,
            asynchronous=stock.asynchronous,
            leading_lines=stock.leading_lines,
        )
        renamed = stock.with_changes(name=cst.Name(STOCK_NAME), leading_lines=[cst.EmptyLine(indent=False)])
        class_body = list(cls.body.body)  # type: ignore[union-attr]
        class_body[index : index + 1] = [new, renamed]
        cls = cls.with_changes(body=cls.body.with_changes(body=class_body))
        body = list(tree.body)
        body[class_index] = cls
        return tree.with_changes(body=body)

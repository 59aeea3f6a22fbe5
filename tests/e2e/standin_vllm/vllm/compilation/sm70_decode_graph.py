"""Stand-in of the SM70 Qwen3.8 decode-graph compile phase.

1CatAI/1Cat-vLLM's ple_layer.py at 22ab8e0743c277d1418aa62de274cfac27252d04 and at
6d7071b64dc557be0c18982c4f480e8f147c31a1 does ``from vllm.compilation.sm70_decode_graph import
use_sm70_decode_graph_semantics`` and calls it with no argument (in the compiled-prefill gate
test); the public index holds no 1CatAI/1Cat-vLLM copy of the module. This mirrors the fork
copy that reads the same switch those commits read (``vllm.envs``, before the execution
policies): vllm/compilation/sm70_decode_graph.py of rapatel0/1Cat-vLLM at
a223f04653180aa0fb119c7bfead0dc7dfe6dbc2. The same module of Qixiao02/1Cat-vLLM at
cc9a6a63d1e7d756778a8153d1809dcccc93dc81 adds an MTP-lane term; abcd19886/1Cat-vLLM at
b2055708be93d907c17ca49ae95c83df720efde0 takes ``policy=None`` and reads ``graph_policy()``.

Reproduced: ``sm70_decode_graph_compilation(enabled=True)`` marks the decode-graph phase for
the ``with`` block (a context variable, reset on exit); ``is_sm70_decode_graph_compiling()``
reads it; ``use_sm70_decode_graph_semantics()`` is true (the legacy single-compile semantics)
unless ``VLLM_SM70_QWEN38_DUAL_COMPILE`` is on (default off), and then only inside that phase.
Not reproduced: ``torch.compiler.assume_constant_result`` on the phase query (nothing here
is traced).
"""

from contextlib import contextmanager
from contextvars import ContextVar

import vllm.envs as envs

_decode_graph_phase = ContextVar("sm70_decode_graph_compilation", default=False)


@contextmanager
def sm70_decode_graph_compilation(enabled: bool = True):
    token = _decode_graph_phase.set(enabled)
    try:
        yield
    finally:
        _decode_graph_phase.reset(token)


def is_sm70_decode_graph_compiling() -> bool:
    return _decode_graph_phase.get()


def use_sm70_decode_graph_semantics() -> bool:
    if not envs.VLLM_SM70_QWEN38_DUAL_COMPILE:
        return True
    return is_sm70_decode_graph_compiling()
